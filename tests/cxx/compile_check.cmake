# Compiles one snippet of tests/cxx/misuse/ and checks the outcome its header
# states (run by ctest as `cmake -P`):
#
#   // std: c++20                    the -std= to compile with
#   // expect: error                 "error": must not compile; "ok": must
#   // reason: <CMake regex>         (error only) GCC's output must match it
#   // reason-clang: <CMake regex>   (error only) and clang's this one
#
# A misuse snippet passes only if the compiler refuses it AND says why in
# the expected words, so an unrelated error (a typo, a missing include) in
# the snippet fails the test instead of passing it.
#
# Variables: CXX (the compiler), CXX_ID (CMAKE_CXX_COMPILER_ID: GNU or
# Clang), SOURCE (the snippet), INCLUDES (a ;-separated list of include
# directories).
foreach(v CXX CXX_ID SOURCE INCLUDES)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "compile_check.cmake: -D${v}=... is required")
  endif()
endforeach()

file(STRINGS "${SOURCE}" std_line REGEX "^// std: ")
file(STRINGS "${SOURCE}" expect_line REGEX "^// expect: ")
if(CXX_ID MATCHES "Clang")
  set(reason_tag "reason-clang")
else()
  set(reason_tag "reason")
endif()
file(STRINGS "${SOURCE}" reason_line REGEX "^// ${reason_tag}: ")
string(REGEX REPLACE "^// std: *" "" std "${std_line}")
string(REGEX REPLACE "^// expect: *" "" expect "${expect_line}")
string(REGEX REPLACE "^// ${reason_tag}: *" "" reason "${reason_line}")
if(NOT std MATCHES "^c\\+\\+[0-9]+$" OR NOT expect MATCHES "^(error|ok)$")
  message(FATAL_ERROR "${SOURCE}: needs `// std: c++NN` and `// expect: error|ok` lines")
endif()
if(expect STREQUAL "error" AND reason STREQUAL "")
  message(FATAL_ERROR "${SOURCE}: an `// expect: error` snippet needs a `// ${reason_tag}:` line")
endif()

set(include_flags "")
foreach(dir IN LISTS INCLUDES)
  list(APPEND include_flags "-I${dir}")
endforeach()

# LC_ALL=C: ASCII quotes in diagnostics, so `reason` can match them with '.
execute_process(
  COMMAND ${CMAKE_COMMAND} -E env LC_ALL=C LANG=C
          ${CXX} -std=${std} -fsyntax-only -Wall -Wextra -pedantic -Werror
          ${include_flags} ${SOURCE}
  RESULT_VARIABLE rc
  OUTPUT_VARIABLE out
  ERROR_VARIABLE out)

if(expect STREQUAL "ok")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${SOURCE} must compile, but:\n${out}")
  endif()
  message(STATUS "compiles, as it must")
elseif(rc EQUAL 0)
  message(FATAL_ERROR "${SOURCE} must NOT compile (${reason}), but it did")
elseif(NOT out MATCHES "${reason}")
  message(FATAL_ERROR "${SOURCE} fails to compile, but not for the expected reason\n"
                      "  expected: ${reason}\n  compiler said:\n${out}")
else()
  message(STATUS "refused, as it must: ${CMAKE_MATCH_0}")
endif()
