# Writes a file's text into a C++ source as a function returning it:
# cmake -DIN=page.html -DOUT=page.cpp -DFUNCTION=nmt::translate_page -P embed.cmake
file(READ ${IN} content)
string(REGEX REPLACE "::[^:]*$" "" ns "${FUNCTION}")
string(REGEX REPLACE "^.*::" "" fn "${FUNCTION}")
file(WRITE ${OUT} "// Generated from ${IN} by cmake/embed.cmake.\n#include <string>\n\nnamespace ${ns} {\n\nconst std::string& ${fn}() {\n  static const std::string text = R\"nmt_embed(${content})nmt_embed\";\n  return text;\n}\n\n}  // namespace ${ns}\n")
