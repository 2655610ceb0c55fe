// checkpoint_parts_test.cc: checkpoints written before optimizer parts
// (optimizer_parts.h) hold a wide weight's moments as one tensor; restoring
// one into a model that keeps them in parts cuts each into its parts, bit
// for bit, and a checkpoint that does not split is refused before anything
// is written.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "strata/store.h"
#include "tests/util/test_util.h"
#include "train/compute/compute.h"
#include "train/io/checkpoint_reader.h"
#include "train/io/checkpoint_writer.h"
#include "train/model/model.h"

namespace strata::train {
namespace {

using ::strata::testing::FillPattern;
using ::strata::testing::SmallStoreOptions;
using ::strata::testing::TempDir;
using ::testing::HasSubstr;

// 32 -> 1100 x 2 -> 4: the middle weight's moments are two parts each.
ModelConfig Wide(int64_t width = 1100) {
  ModelConfig c;
  c.inputs = 32;
  c.classes = 4;
  c.width = width;
  c.depth = 2;
  c.batch = 8;
  return c;
}

struct Model {
  explicit Model(ModelConfig c = Wide()) {
    auto s = Store::Open(
        SmallStoreOptions(dir.path(), 32 * kMiB, 64 * kMiB, 128 * kMiB));
    EXPECT_TRUE(s.ok()) << s.status();
    store = std::move(*s);
    auto m = Mlp::Create(store.get(), compute.get(), c);
    EXPECT_TRUE(m.ok()) << m.status();
    mlp = std::move(*m);
  }
  std::vector<char> Bytes(TensorId id) {
    std::vector<char> out(store->GetSpec(id)->size_bytes);
    EXPECT_TRUE(store->Read(id, out.data(), out.size()).ok());
    return out;
  }
  std::string Name(TensorId id) { return store->GetSpec(id)->name; }
  TempDir dir;
  std::unique_ptr<Compute> compute = MakeCpuCompute(1);
  std::unique_ptr<Store> store;
  std::unique_ptr<Mlp> mlp;
};

// Saves `m`'s state the way strata did before parts: each run of
// "<base>.part<k>" as one tensor "<base>" of the weight's shape (less its
// last `trim` floats, for a checkpoint that does not split).
std::string SaveOldFormat(Model& m, const std::string& dir, int trim = 0) {
  std::vector<TensorId> tensors;
  std::string base;
  std::vector<char> whole;
  auto flush = [&] {
    if (base.empty()) return;
    whole.resize(whole.size() - 4 * trim);
    const int64_t floats = static_cast<int64_t>(whole.size() / 4);
    auto id =
        m.store->Create({.name = base,
                         .size_bytes = whole.size(),
                         .dtype = DType::kFloat32,
                         .shape = trim == 0 ? std::vector<int64_t>{1100, 1100}
                                            : std::vector<int64_t>{floats},
                         .home = Tier::kHost});
    EXPECT_TRUE(id.ok()) << id.status();
    EXPECT_TRUE(m.store->Write(*id, whole.data(), whole.size()).ok());
    tensors.push_back(*id);
    base.clear();
    whole.clear();
  };
  for (TensorId id : m.mlp->StateTensors()) {
    const std::string name = m.Name(id);
    const size_t part = name.rfind(".part");
    if (part == std::string::npos) {
      flush();
      tensors.push_back(id);
      continue;
    }
    if (name.substr(0, part) != base) flush();
    base = name.substr(0, part);
    const std::vector<char> bytes = m.Bytes(id);
    whole.insert(whole.end(), bytes.begin(), bytes.end());
  }
  flush();
  auto saved = SaveCheckpoint(
      *m.store, {.model = "mlp", .step = 3, .tensors = tensors}, {.dir = dir});
  EXPECT_TRUE(saved.ok()) << saved.status();
  return saved.ok() ? saved->path : "";
}

// Gives every state tensor distinct contents; returns how many are parts.
int FillState(Model& m) {
  uint64_t seed = 1;
  int parts = 0;
  for (TensorId id : m.mlp->StateTensors()) {
    std::vector<char> bytes(m.store->GetSpec(id)->size_bytes);
    FillPattern(bytes.data(), bytes.size(), seed++);
    EXPECT_TRUE(m.store->Write(id, bytes.data(), bytes.size()).ok());
    parts += m.Name(id).find(".part") != std::string::npos;
  }
  return parts;
}

TEST(CheckpointPartsTest, AWholeTensorFromAnOlderStrataFillsItsParts) {
  Model before;
  ASSERT_EQ(FillState(before), 4);  // layer1's two moments, two parts each
  TempDir saves;
  const std::string path = SaveOldFormat(before, saves.path());
  auto reader = CheckpointReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  ASSERT_EQ((*reader)->manifest().tensors.size(), 3u * 6);
  Model after;
  ASSERT_TRUE(
      RestoreTensors(**reader, *after.store, after.mlp->StateTensors()).ok());
  const std::vector<TensorId> a = before.mlp->StateTensors();
  const std::vector<TensorId> b = after.mlp->StateTensors();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(before.Name(a[i]), after.Name(b[i]));
    EXPECT_EQ(before.Bytes(a[i]), after.Bytes(b[i])) << before.Name(a[i]);
  }
}

TEST(CheckpointPartsTest, AWholeTensorThatDoesNotSplitIsRefused) {
  Model before;
  FillState(before);
  TempDir saves;
  const std::string path = SaveOldFormat(before, saves.path());
  auto reader = CheckpointReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  Model other(Wide(1200));  // other layer shapes
  absl::Status s =
      RestoreTensors(**reader, *other.store, other.mlp->StateTensors());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("this model"));
  // The same model, but a whole tensor one float short: refused before
  // any tensor is written.
  TempDir short_saves;
  auto short_reader =
      CheckpointReader::Open(SaveOldFormat(before, short_saves.path(), 1));
  ASSERT_TRUE(short_reader.ok()) << short_reader.status();
  Model same;
  s = RestoreTensors(**short_reader, *same.store, same.mlp->StateTensors());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("does not split into this model's 2 "
                                     "parts"));
  EXPECT_FALSE(same.store->GetResidency(same.mlp->StateTensors()[2])
                   ->has_contents);  // layer0's moment: nothing written
}

}  // namespace
}  // namespace strata::train
