# Locates the CUTLASS/CuTe headers. Order:
#   1. -DSPLITKV_CUTLASS_DIR=<dir> (a directory containing cute/ and cutlass/)
#   2. <repo>/.deps/cutlass/include (what scripts copy there, e.g. for the GPU machine)
#   3. the pip package nvidia-cutlass (site-packages/cutlass_library/source/include)
# CUTLASS is never committed; see requirements.txt.
function(find_cutlass_headers out_var)
  set(candidates "")
  if(SPLITKV_CUTLASS_DIR)
    if(NOT EXISTS "${SPLITKV_CUTLASS_DIR}/cute/tensor.hpp")
      message(FATAL_ERROR "SPLITKV_CUTLASS_DIR=${SPLITKV_CUTLASS_DIR} has no cute/tensor.hpp")
    endif()
    set(${out_var} "${SPLITKV_CUTLASS_DIR}" PARENT_SCOPE)
    message(STATUS "splitkv: CUTLASS headers from SPLITKV_CUTLASS_DIR: ${SPLITKV_CUTLASS_DIR}")
    return()
  endif()
  if(EXISTS "${PROJECT_SOURCE_DIR}/.deps/cutlass/include/cute/tensor.hpp")
    set(${out_var} "${PROJECT_SOURCE_DIR}/.deps/cutlass/include" PARENT_SCOPE)
    message(STATUS "splitkv: CUTLASS headers from .deps/cutlass/include")
    return()
  endif()
  find_package(Python3 COMPONENTS Interpreter QUIET)
  if(Python3_Interpreter_FOUND)
    execute_process(
      COMMAND ${Python3_EXECUTABLE} -c
        "import cutlass_library, os; print(os.path.join(os.path.dirname(cutlass_library.__file__), 'source', 'include'))"
      OUTPUT_VARIABLE pip_dir OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
    if(rc EQUAL 0 AND EXISTS "${pip_dir}/cute/tensor.hpp")
      set(${out_var} "${pip_dir}" PARENT_SCOPE)
      message(STATUS "splitkv: CUTLASS headers from pip package: ${pip_dir}")
      return()
    endif()
  endif()
  message(FATAL_ERROR
    "splitkv: CUTLASS/CuTe headers not found. Install them with\n"
    "    python3 -m pip install -r requirements.txt\n"
    "or pass -DSPLITKV_CUTLASS_DIR=<dir containing cute/ and cutlass/>.")
endfunction()
