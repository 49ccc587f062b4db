# The toolchain record of model files (include/ukb/model_file.hpp): the
# compilers and flags this ukb is built with, so that a plugin compiled from
# a model file is built as the library is. Two copies:
#  - build/share/ukb/toolchain.json, for the build tree (absolute paths);
#  - share/ukb/toolchain.json, installed, where @PREFIX@ stands for the
#    prefix it is installed under (found from the file's own place, so an
#    installed tree can be moved).
# Included from the top-level CMakeLists.txt after the ukb target exists.

function(_ukb_json_list out)
  set(items "")
  foreach(x IN LISTS ARGN)
    string(REPLACE "\\" "\\\\" x "${x}")
    string(REPLACE "\"" "\\\"" x "${x}")
    list(APPEND items "\"${x}\"")
  endforeach()
  list(JOIN items ", " joined)
  set(${out} "[${joined}]" PARENT_SCOPE)
endfunction()

string(TOUPPER "${CMAKE_BUILD_TYPE}" _ukb_bt)
separate_arguments(_ukb_cxx_flags UNIX_COMMAND "${CMAKE_CXX_FLAGS} ${CMAKE_CXX_FLAGS_${_ukb_bt}}")
list(APPEND _ukb_cxx_flags ${CMAKE_CXX20_STANDARD_COMPILE_OPTION} -ffp-contract=off)
separate_arguments(_ukb_omp UNIX_COMMAND "${OpenMP_CXX_FLAGS}")
list(APPEND _ukb_cxx_flags ${_ukb_omp})
if(UKB_NATIVE AND UKB_HAVE_MARCH_NATIVE)
  list(APPEND _ukb_cxx_flags -march=native)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 12.3)
    list(APPEND _ukb_cxx_flags -Wno-uninitialized -Wno-maybe-uninitialized)
  endif()
endif()
set(_ukb_link_flags ${_ukb_omp})
if(UKB_SANITIZE OR UKB_FUZZ)
  list(APPEND _ukb_link_flags -fsanitize=address,undefined)
else()
  # Every symbol of a plugin resolved when it is linked, not when it is loaded.
  list(APPEND _ukb_link_flags -Wl,--no-undefined)
endif()
if(UKB_ENABLE_CUDA)
  list(APPEND _ukb_cxx_flags -DUKB_HAVE_CUDA=1)
endif()
get_target_property(_ukb_eigen Eigen3::Eigen INTERFACE_INCLUDE_DIRECTORIES)

set(_ukb_nvcc "")
set(_ukb_nvcc_id "")
set(_ukb_cuda_flags "")
set(_ukb_cuda_link "")
if(UKB_ENABLE_CUDA)
  set(_ukb_nvcc "${CMAKE_CUDA_COMPILER}")
  set(_ukb_nvcc_id "${CMAKE_CUDA_COMPILER_ID} ${CMAKE_CUDA_COMPILER_VERSION}")
  separate_arguments(_ukb_cuda_flags UNIX_COMMAND "${CMAKE_CUDA_FLAGS} ${CMAKE_CUDA_FLAGS_${_ukb_bt}}")
  list(APPEND _ukb_cuda_flags -std=c++20 --expt-relaxed-constexpr -DUKB_HAVE_CUDA=1)
  if(CMAKE_CUDA_HOST_COMPILER)
    list(APPEND _ukb_cuda_flags -ccbin "${CMAKE_CUDA_HOST_COMPILER}")
  endif()
  # The architectures as CMake reads CMAKE_CUDA_ARCHITECTURES: NN (PTX and
  # code for sm_NN), NN-real (the code only), NN-virtual (the PTX only,
  # compiled for the device when it is loaded), or native / all / all-major.
  foreach(a IN LISTS UKB_CUDA_ARCHITECTURES)
    if(a MATCHES "^([0-9]+[a-z]?)-virtual$")
      list(APPEND _ukb_cuda_flags "--generate-code=arch=compute_${CMAKE_MATCH_1},code=[compute_${CMAKE_MATCH_1}]")
    elseif(a MATCHES "^([0-9]+[a-z]?)-real$")
      list(APPEND _ukb_cuda_flags "--generate-code=arch=compute_${CMAKE_MATCH_1},code=[sm_${CMAKE_MATCH_1}]")
    elseif(a MATCHES "^(native|all|all-major)$")
      list(APPEND _ukb_cuda_flags "-arch=${a}")
    else()
      list(APPEND _ukb_cuda_flags "--generate-code=arch=compute_${a},code=[compute_${a},sm_${a}]")
    endif()
  endforeach()
  set(_ukb_cuda_link "-L${CUDAToolkit_LIBRARY_DIR}" "-Wl,-rpath,${CUDAToolkit_LIBRARY_DIR}" -lcudart)
endif()

foreach(_ukb_variant build install)
  if(_ukb_variant STREQUAL "build")
    set(_ukb_incs "${PROJECT_SOURCE_DIR}/include" "${PROJECT_SOURCE_DIR}/kernels" ${_ukb_eigen})
    set(_ukb_lib "$<TARGET_FILE:ukb>")
    set(_ukb_out "${CMAKE_BINARY_DIR}/share/ukb/toolchain.json")
    set(_ukb_san_dir "${PROJECT_SOURCE_DIR}/cmake")
  else()
    set(_ukb_incs "@PREFIX@/${CMAKE_INSTALL_INCLUDEDIR}" ${_ukb_eigen})
    set(_ukb_lib "@PREFIX@/${CMAKE_INSTALL_LIBDIR}/$<TARGET_FILE_NAME:ukb>")
    set(_ukb_out "${CMAKE_BINARY_DIR}/toolchain-install.json")
    set(_ukb_san_dir "@PREFIX@/${CMAKE_INSTALL_DATADIR}/ukb")
  endif()
  # A plugin of a sanitizer build is compiled as the library is
  # (ukb_sanitizer_cxx_flags in CMakeLists.txt), with the two files of the
  # source tree or of the installed package.
  set(_ukb_variant_cxx_flags ${_ukb_cxx_flags})
  if(UKB_SANITIZE OR UKB_FUZZ)
    ukb_sanitizer_cxx_flags(_ukb_san "${_ukb_san_dir}")
    list(APPEND _ukb_variant_cxx_flags ${_ukb_san})
  endif()
  _ukb_json_list(_j_cxx_flags ${_ukb_variant_cxx_flags})
  _ukb_json_list(_j_link_flags ${_ukb_link_flags})
  _ukb_json_list(_j_incs ${_ukb_incs})
  _ukb_json_list(_j_link ${_ukb_lib})
  _ukb_json_list(_j_cuda_flags ${_ukb_cuda_flags})
  _ukb_json_list(_j_cuda_link ${_ukb_cuda_link})
  file(GENERATE OUTPUT "${_ukb_out}" CONTENT "{
  \"ukb_version\": \"${PROJECT_VERSION}\",
  \"cxx\": \"${CMAKE_CXX_COMPILER}\",
  \"cxx_id\": \"${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION}\",
  \"cxx_flags\": ${_j_cxx_flags},
  \"link_flags\": ${_j_link_flags},
  \"includes\": ${_j_incs},
  \"link\": ${_j_link},
  \"nvcc\": \"${_ukb_nvcc}\",
  \"nvcc_id\": \"${_ukb_nvcc_id}\",
  \"cuda_flags\": ${_j_cuda_flags},
  \"cuda_link\": ${_j_cuda_link}
}
")
endforeach()
