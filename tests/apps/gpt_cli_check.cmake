# gpt_cli_check.cmake: `strata train --model=gpt` end to end at a tiny size —
# a corpus file written here, the byte tokenizer, three steps through the
# store with NVMe — then the JSON report's keys and values, the sample, the
# report read back with --config repeating the losses bit for bit, an fp16
# run's report, and a bad
# shape refused with exit code 2 before any corpus is prepared.
# Run by ctest: cmake -DSTRATA=... -DWORK=... -P gpt_cli_check.cmake
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
  --host-budget=16MiB --nvme-budget=64MiB)

execute_process(COMMAND "${STRATA}" ${common} --max-steps=3 --sample=8
  --json=${WORK}/report.json RESULT_VARIABLE rc OUTPUT_VARIABLE out
  ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "strata train --model=gpt failed (${rc}):\n${out}\n${err}")
endif()
file(READ "${WORK}/report.json" report)
string(JSON model GET "${report}" model)
string(JSON steps LENGTH "${report}" losses)
string(JSON val GET "${report}" val_loss)
string(JSON base GET "${report}" baseline_val_loss)
string(JSON home GET "${report}" resolved home_tier)
string(JSON tokenizer GET "${report}" tokenizer)
string(JSON sample GET "${report}" sample text)
if(NOT model STREQUAL "gpt" OR NOT steps EQUAL 3 OR NOT tokenizer STREQUAL "byte")
  message(FATAL_ERROR "report: model=${model} steps=${steps} tokenizer=${tokenizer}")
endif()
if(NOT val GREATER 0 OR NOT base GREATER 0 OR NOT home STREQUAL "nvme")
  message(FATAL_ERROR "report: val_loss=${val} baseline=${base} home=${home}")
endif()
if(sample STREQUAL "")
  message(FATAL_ERROR "report: no sample")
endif()
# --eval-tokens=256 is 16 whole windows of --context=16: all 256 scored.
string(JSON val_tokens GET "${report}" val_tokens)
if(NOT val_tokens EQUAL 256)
  message(FATAL_ERROR "report: val_tokens=${val_tokens}, not 256")
endif()
if(NOT out MATCHES "validation loss +[0-9.]+ nats/token over 256 tokens")
  message(FATAL_ERROR "no result table naming the tokens scored:\n${out}")
endif()

# The report as a config repeats the run: the same losses, bit for bit (the
# JSON arrays as text), and the same "config".
execute_process(COMMAND "${STRATA}" train --config=${WORK}/report.json
  --json=${WORK}/again.json RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "strata train --config=report.json failed (${rc}):\n${err}")
endif()
file(READ "${WORK}/again.json" again)
string(JSON losses GET "${report}" losses)
string(JSON losses_again GET "${again}" losses)
string(JSON config GET "${report}" config)
string(JSON config_again GET "${again}" config)
string(JSON config_layers GET "${report}" config layers)
if(NOT losses STREQUAL losses_again OR NOT config STREQUAL config_again OR
   NOT config_layers EQUAL 1)
  message(FATAL_ERROR "--config did not repeat the run:\n${losses}\n${losses_again}")
endif()

# fp16 with two micro-batches a step: the report says what the run did
# (precision, skips, the loss scale, accumulate), and the text table has its
# row.
execute_process(COMMAND "${STRATA}" ${common} --max-steps=2 --precision=fp16
  --accumulate=2 --json=${WORK}/fp16.json RESULT_VARIABLE rc OUTPUT_VARIABLE out
  ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "strata train --model=gpt --precision=fp16 failed (${rc}):\n${out}\n${err}")
endif()
file(READ "${WORK}/fp16.json" half_report)
string(JSON precision GET "${half_report}" precision)
string(JSON skipped GET "${half_report}" skipped_steps)
string(JSON scale0 GET "${half_report}" loss_scale_history 0 scale)
string(JSON h2d GET "${half_report}" h2d_bytes_per_param_step)
string(JSON accumulate GET "${half_report}" resolved accumulate)
if(NOT precision MATCHES "^fp16$" OR skipped LESS 0 OR NOT scale0 MATCHES "^65536"
   OR NOT h2d GREATER 0 OR NOT out MATCHES "precision +fp16"
   OR NOT accumulate EQUAL 2 OR err MATCHES "ignores")
  message(FATAL_ERROR "fp16 report: precision=${precision} skipped=${skipped} scale=${scale0} h2d=${h2d}\n${out}")
endif()

# A bad shape: exit 2, and the cache is not touched.
execute_process(COMMAND "${STRATA}" ${common} --heads=3 --max-steps=1
  --cache-dir=${WORK}/fresh RESULT_VARIABLE rc ERROR_VARIABLE err
  OUTPUT_QUIET)
if(NOT rc EQUAL 2 OR NOT err MATCHES "--heads=3" OR EXISTS "${WORK}/fresh")
  message(FATAL_ERROR "bad --heads: rc=${rc}, fresh cache exists? ${err}")
endif()
file(REMOVE_RECURSE "${WORK}")
