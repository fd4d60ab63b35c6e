# Run by ctest: installs the built ember into a scratch prefix and builds a downstream project
# against it with find_package(ember CONFIG), then runs it; and configures a project that pulls
# ember in with add_subdirectory.
#   cmake -DEMBER_SOURCE_DIR=... -DEMBER_BINARY_DIR=... -DSCRATCH=... -P check.cmake
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE output)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "failed: ${ARGN}\n${output}")
  endif()
endfunction()

file(REMOVE_RECURSE ${SCRATCH})
run(${CMAKE_COMMAND} --install ${EMBER_BINARY_DIR} --prefix ${SCRATCH}/prefix)
run(${CMAKE_COMMAND} -S ${EMBER_SOURCE_DIR}/tests/downstream/find_package -B ${SCRATCH}/find_package
    -DCMAKE_PREFIX_PATH=${SCRATCH}/prefix -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build ${SCRATCH}/find_package)
run(${SCRATCH}/find_package/uses_ember)
message(STATUS "find_package(ember CONFIG): built and ran a downstream program")

run(${CMAKE_COMMAND} -S ${EMBER_SOURCE_DIR}/tests/downstream/add_subdirectory -B ${SCRATCH}/add_subdirectory
    -DEMBER_SOURCE_DIR=${EMBER_SOURCE_DIR} -DEMBER_CUDA=OFF)
message(STATUS "add_subdirectory(ember): configured a downstream project using ember::ember")
