// checkpoint_reader_fuzzer.cc: a checkpoint directory as `strata train
// --resume` and `strata export` meet it. The input is manifest.json and
// tensors.bin joined by kPartSeparator; the manifest is resealed (its
// checksum made right) so that mutations reach the tensor reads. Each
// tensor is read in chunks as a resume does, then the checkpoint exported
// to safetensors and that file's header read back.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "tests/fuzz/fuzz_target.h"
#include "train/io/checkpoint_manifest.h"
#include "train/io/checkpoint_reader.h"
#include "train/io/safetensors_header.h"
#include "train/run/safetensors.h"

namespace strata::fuzz {
namespace {

using train::CheckpointReader;
using train::CheckpointTensorEntry;

// Reads every tensor in chunks; a tensor that reads OK gave exactly its
// bytes, the same ones ReadTensor gives. Returns whether all read OK.
bool ReadEveryTensor(const CheckpointReader& reader, uint64_t file_bytes) {
  bool all = true;
  for (const CheckpointTensorEntry& e : reader.manifest().tensors) {
    std::string got;
    const absl::Status read =
        reader.ReadTensorChunks(e, [&](std::string_view chunk) {
          STRATA_FUZZ_CHECK(chunk.size() <= (uint64_t{1} << 20));
          STRATA_FUZZ_CHECK(got.size() + chunk.size() <= file_bytes);
          got.append(chunk);
          return absl::OkStatus();
        });
    STRATA_FUZZ_CHECK_REFUSAL(read);
    all = all && read.ok();
    if (!read.ok()) continue;
    STRATA_FUZZ_CHECK(got.size() == e.bytes);
    std::string whole(e.bytes, '\0');
    STRATA_FUZZ_CHECK(reader.ReadTensor(e, whole.data()).ok());
    STRATA_FUZZ_CHECK(whole == got);
  }
  return all;
}

// An export that succeeds wrote a file strata's own reader accepts, with
// the parameters' bytes. Returns whether it succeeded.
bool Export(const std::string& checkpoint, const std::string& out) {
  auto done = train::ExportSafetensors(checkpoint, out);
  STRATA_FUZZ_CHECK_REFUSAL(done.status());
  if (!done.ok()) return false;
  auto header = train::ReadSafetensorsHeader(out);
  STRATA_FUZZ_CHECK(header.ok());
  STRATA_FUZZ_CHECK(static_cast<int>(header->tensors.size()) == done->tensors);
  STRATA_FUZZ_CHECK(8 + header->header_bytes + header->data_bytes ==
                    done->bytes);
  return true;
}

}  // namespace
}  // namespace strata::fuzz

STRATA_FUZZ_TARGET(checkpoint_reader) {
  using namespace strata::fuzz;
  const std::vector<std::string_view> parts = SplitParts(data, 2);
  const std::string scratch = FreshScratchDir();
  const std::string dir = scratch + "/save";
  const std::string step = dir + "/step-00000001";
  std::filesystem::create_directories(step);
  WriteFile(step + "/manifest.json",
            strata::train::ResealManifest(std::string(parts[0])));
  WriteFile(step + "/tensors.bin", parts[1]);
  auto resolved = strata::train::ResolveCheckpoint(dir);
  STRATA_FUZZ_CHECK(resolved.ok() && *resolved == step);
  auto reader = CheckpointReader::Open(step);
  STRATA_FUZZ_CHECK_REFUSAL(reader.status());
  bool accepted = false;
  if (reader.ok()) {
    STRATA_FUZZ_CHECK((*reader)->manifest().data_bytes == parts[1].size());
    accepted = ReadEveryTensor(**reader, parts[1].size());
  }
  const bool exported = Export(dir, scratch + "/model.safetensors");
  return accepted && exported;
}
