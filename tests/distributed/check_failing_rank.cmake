# Runs distributed_failing_rank under mpirun and checks that the job ends by itself, with a
# non-zero exit code and the failing rank's message. Called by ctest with -DMPIRUN and -DPROGRAM.
string(REPLACE ";" " " shown "${MPIRUN} ${PROGRAM}")
execute_process(COMMAND ${MPIRUN} ${PROGRAM} TIMEOUT 60 RESULT_VARIABLE result OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
message(STATUS "${shown} -> ${result}\n${out}${err}")
if(result STREQUAL "0")
  message(FATAL_ERROR "the job with a failing rank exited 0")
endif()
if(result MATCHES "timeout|Process terminated due to timeout")
  message(FATAL_ERROR "the job with a failing rank did not end within 60 s")
endif()
if(NOT "${out}${err}" MATCHES "rank 1 of 2: uncaught exception: rank 1's data loader failed on purpose")
  message(FATAL_ERROR "the failing rank's message is missing")
endif()
