# Read right after llama.cpp's project() call (.ci/run passes it to the llama-cpp-python wheel's
# build as CMAKE_PROJECT_llama.cpp_INCLUDE). llama-cpp-python forces LLAMA_BUILD_COMMON on in the
# cache, so llama.cpp's common library and cpp-httplib (53 of the build's 127 objects) are compiled
# and installed as a libllama-common.so the Python package never loads (it opens libllama,
# libggml and, with LLAVA_BUILD, libmtmd). A normal variable shadows that cache entry in
# llama.cpp's directory and option() keeps it (policy CMP0077), so common is neither built nor
# installed; libllama and libggml compile with the same flags as before.
set(LLAMA_BUILD_COMMON OFF)
