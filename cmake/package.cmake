# cpack -G DEB: Debian packages of what `cmake --install` installs, one per
# component: nmt (the binary, libnmt, nmt serve's HTTP module, man pages,
# completions, configs), nmt-dev (headers and CMake package), python3-nmt
# (import nmt), nmt-mpi and nmt-cuda (the optional modules, recommended and
# suggested). Dependencies are computed from the binaries by dpkg-shlibdeps,
# but nmt-cuda's: NVIDIA's CUDA runtime is not a Debian package, and without
# it the module says so in `nmt --version` instead of loading.
set(CPACK_PACKAGE_NAME nmt)
set(CPACK_PACKAGE_VENDOR "nmt developers")
set(CPACK_PACKAGE_CONTACT "nmt developers <dev@nmt.local>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "Transformer neural machine translation: train, translate, score, serve")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_GENERATOR DEB)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)
set(CPACK_COMPONENTS_ALL nmt dev)
set(CPACK_DEBIAN_NMT_PACKAGE_NAME nmt)
set(CPACK_DEBIAN_DEV_PACKAGE_NAME nmt-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "nmt (= ${PROJECT_VERSION})")
set(CPACK_DEBIAN_DEV_DESCRIPTION "nmt's C++ API: headers and CMake package (find_package(nmt))")
string(CONCAT CPACK_DEBIAN_NMT_DESCRIPTION
  "Transformer neural machine translation: train, translate, score, serve\n"
  "One binary, nmt: trains translation models on parallel text, translates\n"
  "text, files and HTML with them, scores with BLEU, chrF and TER as sacreBLEU\n"
  "does, and serves LibreTranslate's and DeepL's HTTP APIs; fast on CPUs\n"
  "through oneDNN.")
if(TARGET nmt_mpi)
  list(APPEND CPACK_COMPONENTS_ALL mpi)
  set(CPACK_DEBIAN_MPI_PACKAGE_NAME nmt-mpi)
  set(CPACK_DEBIAN_MPI_PACKAGE_DEPENDS "nmt (= ${PROJECT_VERSION})")
  set(CPACK_DEBIAN_MPI_DESCRIPTION "nmt's Open MPI module: train and translate on several ranks")
  set(CPACK_DEBIAN_NMT_PACKAGE_RECOMMENDS nmt-mpi)
endif()
if(TARGET nmt_cuda)
  list(APPEND CPACK_COMPONENTS_ALL cuda)
  set(CPACK_DEBIAN_CUDA_PACKAGE_NAME nmt-cuda)
  set(CPACK_DEBIAN_CUDA_PACKAGE_DEPENDS "nmt (= ${PROJECT_VERSION})")
  set(CPACK_DEBIAN_CUDA_PACKAGE_SHLIBDEPS OFF)
  set(CPACK_DEBIAN_CUDA_DESCRIPTION
    "nmt's CUDA module: train and translate on NVIDIA GPUs (needs NVIDIA's CUDA 13 runtime)")
  set(CPACK_DEBIAN_NMT_PACKAGE_SUGGESTS nmt-cuda)
endif()
if(TARGET nmt_python)
  # The extension is built for one Python (its file name says cpython-3XX).
  get_directory_property(py_major DIRECTORY python DEFINITION Python_VERSION_MAJOR)
  get_directory_property(py_minor DIRECTORY python DEFINITION Python_VERSION_MINOR)
  math(EXPR py_next "${py_minor} + 1")
  list(APPEND CPACK_COMPONENTS_ALL python)
  set(CPACK_DEBIAN_PYTHON_PACKAGE_NAME python3-nmt)
  # What the extension links beyond Python is libnmt, nmt's own (the C++
  # runtime comes with it), which dpkg-shlibdeps cannot see in another
  # component: nmt (= version) says it.
  set(CPACK_DEBIAN_PYTHON_PACKAGE_SHLIBDEPS OFF)
  set(CPACK_DEBIAN_PYTHON_PACKAGE_CONTROL_EXTRA ${CMAKE_CURRENT_LIST_DIR}/python3-nmt/prerm)
  set(CPACK_DEBIAN_PYTHON_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)
  set(CPACK_DEBIAN_PYTHON_PACKAGE_DEPENDS
    "nmt (= ${PROJECT_VERSION}), python3 (>= ${py_major}.${py_minor}~), python3 (<< ${py_major}.${py_next})")
  set(CPACK_DEBIAN_PYTHON_DESCRIPTION
    "nmt's Python module: import nmt (Translator, translate_batch, score)")
endif()
include(CPack)
