# cpack -G DEB: Debian packages of what `cmake --install` installs, one per
# component: nmt (the binary, libnmt, nmt serve's HTTP module, man pages,
# completions, configs), nmt-dev (headers and CMake package), nmt-mpi and
# nmt-cuda (the optional modules, recommended and suggested). Dependencies
# are computed from the binaries by dpkg-shlibdeps, but nmt-cuda's: NVIDIA's
# CUDA runtime is not a Debian package, and without it the module says so
# in `nmt --version` instead of loading.
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
include(CPack)
