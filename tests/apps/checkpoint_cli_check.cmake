# checkpoint_cli_check.cmake: `strata train --model=gpt` saves, resumes and
# exports end to end at a tiny size — four steps saved every two, a run
# resumed from step 2 whose losses are the last two of the first run's
# (compared as JSON text, so bit for bit to the printed digits), --keep
# pruning, the report's checkpoint keys, a resume of another shape refused
# with exit 2 naming the flag, and `strata export` writing a .safetensors.
# Run by ctest: cmake -DSTRATA=... -DWORK=... -P checkpoint_cli_check.cmake
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}/nvme")
set(text "")
foreach(i RANGE 1 300)
  string(APPEND text "and the word ${i} was with the model, and the model was good\n")
endforeach()
file(WRITE "${WORK}/corpus.txt" "${text}")
set(common train --model=gpt --tokenizer=byte --corpus=${WORK}/corpus.txt
  --cache-dir=${WORK}/cache --nvme-dir=${WORK}/nvme --layers=1 --embed=32
  --heads=2 --context=16 --batch=2 --eval-tokens=256 --device-budget=8MiB
  --host-budget=16MiB --nvme-budget=64MiB --max-steps=4)

function(run_strata name)
  execute_process(COMMAND "${STRATA}" ${ARGN} RESULT_VARIABLE rc
    OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${name} failed (${rc}):\n${out}\n${err}")
  endif()
endfunction()

run_strata("the saving run" ${common} --save-dir=${WORK}/ckpt --save-every=1
  --keep=3 --json=${WORK}/full.json)
foreach(step 2 3 4)
  if(NOT EXISTS "${WORK}/ckpt/step-0000000${step}/manifest.json")
    message(FATAL_ERROR "no checkpoint of step ${step}")
  endif()
endforeach()
if(EXISTS "${WORK}/ckpt/step-00000001")
  message(FATAL_ERROR "--keep=3 kept step 1 of 4")
endif()
file(READ "${WORK}/full.json" full)
string(JSON saves LENGTH "${full}" checkpoints)
string(JSON last_step GET "${full}" checkpoints 3 step)
string(JSON bytes GET "${full}" checkpoints 3 bytes)
if(NOT saves EQUAL 4 OR NOT last_step EQUAL 4 OR NOT bytes GREATER 0)
  message(FATAL_ERROR "checkpoints: ${saves} saves, last step ${last_step}, ${bytes} bytes")
endif()

run_strata("the resumed run" ${common} --resume=${WORK}/ckpt/step-00000002
  --json=${WORK}/resumed.json)
file(READ "${WORK}/resumed.json" resumed)
string(JSON source GET "${resumed}" resume_source)
string(JSON from GET "${resumed}" resume_step)
string(JSON n LENGTH "${resumed}" losses)
if(NOT from EQUAL 2 OR NOT source MATCHES "step-00000002$" OR NOT n EQUAL 2)
  message(FATAL_ERROR "resumed: from ${from} (${source}), ${n} losses")
endif()
foreach(i 0 1)
  math(EXPR j "${i} + 2")
  string(JSON a GET "${full}" losses ${j})
  string(JSON b GET "${resumed}" losses ${i})
  if(NOT a STREQUAL b)
    message(FATAL_ERROR "step ${j}: loss ${a} uninterrupted, ${b} resumed")
  endif()
endforeach()

execute_process(COMMAND "${STRATA}" ${common} --embed=64 --resume=${WORK}/ckpt
  RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
if(NOT rc EQUAL 2 OR NOT err MATCHES "--embed: checkpoint 32, this run 64")
  message(FATAL_ERROR "another shape: rc=${rc}: ${err}")
endif()

run_strata("strata export" export ${WORK}/ckpt
  --safetensors=${WORK}/model.safetensors)
file(READ "${WORK}/model.safetensors" head LIMIT 8 HEX)
file(SIZE "${WORK}/model.safetensors" size)
if(size LESS 1000 OR NOT head MATCHES "^[0-9a-f]+0000000000$")
  message(FATAL_ERROR "model.safetensors: ${size} bytes, length field ${head}")
endif()
file(REMOVE_RECURSE "${WORK}")
