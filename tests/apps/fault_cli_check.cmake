# fault_cli_check.cmake: `strata train --model=gpt` through NVMe faults, end
# to end at a tiny size, with the test-only switch STRATA_TEST_BLOCK_IO_FAULTS
# (tiers/fault/fault_env.h) failing block I/O below the store:
#  - transient EIO at a fixed, seeded rate: the run finishes with losses
#    equal, as JSON text, to the clean run's, and its report counts retries;
#  - a lasting fault from some read on: exit code 1, the error and where to
#    resume on stderr, a --json report holding the error and the checkpoints
#    written, and a checkpoint that --resume takes, its losses the clean
#    run's;
#  - a save that cannot be written (files capped by ulimit -f): exit code 1
#    and the report still written, with the error.
# Run by ctest: cmake -DSTRATA=... -DWORK=... -P fault_cli_check.cmake
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}/nvme")
set(text "")
foreach(i RANGE 1 300)
  string(APPEND text "and the word ${i} was with the model, and the model was good\n")
endforeach()
file(WRITE "${WORK}/corpus.txt" "${text}")
# Two blocks, budgets that make every step stream through NVMe.
set(common train --model=gpt --tokenizer=byte --corpus=${WORK}/corpus.txt
  --cache-dir=${WORK}/cache --nvme-dir=${WORK}/nvme --layers=2 --embed=32
  --heads=2 --context=16 --batch=2 --eval-tokens=256 --device-budget=256KiB
  --host-budget=400KiB --nvme-budget=16MiB --block-size=64KiB --max-steps=6)
set(env_var STRATA_TEST_BLOCK_IO_FAULTS)

# Runs strata with the environment variable setting `env` (may be "").
function(run_strata name env)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env ${env} "${STRATA}" ${ARGN}
    RESULT_VARIABLE rc
    OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${name} failed (${rc}):\n${out}\n${err}")
  endif()
endfunction()

# Every loss of `b` equals the loss `offset` steps later in `a`.
function(expect_same_losses a b offset what)
  string(JSON n LENGTH "${b}" losses)
  math(EXPR last "${n} - 1")
  foreach(i RANGE 0 ${last})
    math(EXPR j "${i} + ${offset}")
    string(JSON x GET "${a}" losses ${j})
    string(JSON y GET "${b}" losses ${i})
    if(NOT x STREQUAL y)
      message(FATAL_ERROR "${what}: step ${j}: loss ${x} clean, ${y} here")
    endif()
  endforeach()
endfunction()

run_strata("the clean run" "" ${common} --json=${WORK}/clean.json)
file(READ "${WORK}/clean.json" clean)
string(JSON clean_retries GET "${clean}" io_retries)
string(JSON nvme_reads GET "${clean}" nvme_read_bytes)
if(NOT clean_retries EQUAL 0 OR NOT nvme_reads GREATER 0)
  message(FATAL_ERROR "clean run: ${clean_retries} retries, ${nvme_reads} NVMe bytes read")
endif()

# Transient: 3% of requests fail with EIO, and the 3rd surely does.
run_strata("the faulted run" ${env_var}=seed=7,rate=0.03,nth=3 ${common}
  --json=${WORK}/faulted.json)
file(READ "${WORK}/faulted.json" faulted)
string(JSON retries GET "${faulted}" io_retries)
string(JSON n LENGTH "${faulted}" losses)
if(NOT retries GREATER 0 OR NOT n EQUAL 6)
  message(FATAL_ERROR "faulted run: ${retries} retries, ${n} losses")
endif()
expect_same_losses("${clean}" "${faulted}" 0 "faulted run")

# Lasting: every read from the FAULT_FROM-th on fails, after some saves.
execute_process(COMMAND ${CMAKE_COMMAND} -E env
  ${env_var}=from=${FAULT_FROM},ops=reads "${STRATA}" ${common}
  --save-dir=${WORK}/ckpt --save-every=1 --json=${WORK}/failed.json
  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
if(NOT rc EQUAL 1 OR NOT err MATCHES "UNAVAILABLE: .*after 4 attempts"
   OR NOT err MATCHES "is intact: continue with --resume=${WORK}/ckpt")
  message(FATAL_ERROR "lasting fault: rc=${rc}:\n${err}")
endif()
file(READ "${WORK}/failed.json" failed)
string(JSON error GET "${failed}" error)
string(JSON saves LENGTH "${failed}" checkpoints)
if(NOT error MATCHES "after 4 attempts" OR saves LESS 1)
  message(FATAL_ERROR "lasting fault's report: ${saves} saves, error ${error}")
endif()
run_strata("the resumed run" "" ${common} --resume=${WORK}/ckpt
  --json=${WORK}/resumed.json)
file(READ "${WORK}/resumed.json" resumed)
string(JSON from GET "${resumed}" resume_step)
if(from LESS 1)
  message(FATAL_ERROR "resumed from step ${from}")
endif()
expect_same_losses("${clean}" "${resumed}" ${from} "resumed run")

# A save that fails: files larger than 256 KiB cannot be written (SIGXFSZ
# ignored, so write returns EFBIG), and the checkpoint's tensors are larger.
# No NVMe tier here (--resident): its swap file is larger too. TMPDIR names
# no directory because ThreadSanitizer's runtime writes a 512 KiB file there
# at start (the shadow of read-only data, tsan MapRodata) and maps it: capped,
# that mapping ends early and the first read of it is a SIGBUS. Without the
# directory TSan skips the file; strata itself does not read TMPDIR.
execute_process(COMMAND ${CMAKE_COMMAND} -E env TMPDIR=${WORK}/no-such-dir
  sh -c "trap '' XFSZ; ulimit -f 256; exec \"$0\" \"$@\""
  "${STRATA}" train --model=gpt --tokenizer=byte --corpus=${WORK}/corpus.txt
  --cache-dir=${WORK}/cache --layers=2 --embed=32 --heads=2 --context=16
  --batch=2 --eval-tokens=256 --max-steps=2 --resident --save-dir=${WORK}/capped
  --json=${WORK}/capped.json
  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
if(NOT rc EQUAL 1)
  message(FATAL_ERROR "capped save: rc=${rc}:\n${err}")
endif()
file(READ "${WORK}/capped.json" capped)
string(JSON error GET "${capped}" error)
string(JSON steps GET "${capped}" steps)
if(NOT error MATCHES "tensors.bin" OR NOT steps EQUAL 2)
  message(FATAL_ERROR "capped save's report: ${steps} steps, error ${error}")
endif()
file(REMOVE_RECURSE "${WORK}")
