// faulty_block_io.cc: FaultyBlockIo, seeded fault injection for BlockIo.
#include "tiers/fault/faulty_block_io.h"

#include <cerrno>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/splitmix64.h"
#include "tiers/nvme/io_error.h"

namespace strata {
namespace {

// The fault each request gets, with the draw that places a bit flip.
struct Fault {
  bool active = false;
  FaultKind kind = FaultKind::kEio;
  uint64_t draw = 0;
};

// Half of `bytes`, rounded down to the O_DIRECT alignment.
uint64_t ShortPrefix(uint64_t bytes) {
  return bytes / 2 / kDirectIoAlignment * kDirectIoAlignment;
}

absl::Status Injected(const absl::Status& status) {
  return absl::Status(status.code(),
                      absl::StrCat(status.message(), " [injected fault]"));
}

// The error an injected fault of `kind` on `request` returns (not kBitFlip).
absl::Status FaultStatus(FaultKind kind, const IoRequest& request) {
  const uint64_t prefix = ShortPrefix(request.bytes);
  switch (kind) {
    case FaultKind::kEnospc:
      return Injected(IoErrnoStatus(request, ENOSPC));
    case FaultKind::kShortRead:
      return Injected(absl::UnavailableError(absl::StrCat(
          "nvme read file ", request.file_index, " offset ", request.offset,
          ": short read, ", prefix, " of ", request.bytes, " bytes: retry")));
    case FaultKind::kShortWrite:
      return Injected(IoErrnoToStatus(
          EIO, absl::StrCat("nvme write file ", request.file_index, " offset ",
                            request.offset, ": short write, ", prefix, " of ",
                            request.bytes, " bytes")));
    default:
      return Injected(IoErrnoStatus(request, EIO));
  }
}

void FlipBit(const IoRequest& request, uint64_t draw) {
  if (request.bytes == 0) return;
  const uint64_t bit = draw % (request.bytes * 8);
  static_cast<unsigned char*>(request.buf)[bit / 8] ^=
      static_cast<unsigned char>(1u << (bit % 8));
}

}  // namespace

struct FaultyBlockIo::Plan {
  std::vector<Fault> faults;  // one per request
};

absl::StatusCode FaultyBlockIo::InjectedCode(FaultKind kind) {
  if (kind == FaultKind::kBitFlip || kind == FaultKind::kTornCopy) {
    return absl::StatusCode::kOk;
  }
  return FaultStatus(kind, IoRequest{}).code();
}

FaultyBlockIo::FaultyBlockIo(std::unique_ptr<BlockIo> inner,
                             const FaultSpec& spec)
    : inner_(std::move(inner)),
      name_(absl::StrCat("faulty(", std::string(inner_->engine_name()), ")")) {
  set_spec(spec);
}

void FaultyBlockIo::set_spec(const FaultSpec& spec) {
  MutexLock lock(&mu_);
  spec_ = spec;
  draws_.Reset(spec);
}

uint64_t FaultyBlockIo::injected() const {
  MutexLock lock(&mu_);
  return injected_;
}

bool FaultyBlockIo::Matches(const IoRequest& request) const {
  const bool read = request.op == IoOp::kRead;
  switch (spec_.ops) {
    case FaultOps::kAll:
      break;
    case FaultOps::kReads:
      if (!read) return false;
      break;
    case FaultOps::kWrites:
      if (read) return false;
      break;
    default:
      return false;  // device directions: not block I/O
  }
  switch (spec_.kind) {
    case FaultKind::kShortRead:
    case FaultKind::kBitFlip:
      return read;
    case FaultKind::kShortWrite:
      return !read;
    case FaultKind::kTornCopy:
      return false;  // a device fault
    default:
      return true;
  }
}

void FaultyBlockIo::PassGate(absl::Span<const IoRequest> requests) {
  bool reads = false, writes = false;
  for (const IoRequest& r : requests) {
    reads = reads || r.op == IoOp::kRead;
    writes = writes || r.op == IoOp::kWrite;
  }
  if (reads) gate_.Pass(GateOp::kNvmeRead);
  if (writes) gate_.Pass(GateOp::kNvmeWrite);
}

FaultyBlockIo::Plan FaultyBlockIo::PlanFaults(
    absl::Span<const IoRequest> requests) {
  Plan plan;
  plan.faults.resize(requests.size());
  MutexLock lock(&mu_);
  for (size_t i = 0; i < requests.size(); ++i) {
    if (!Matches(requests[i]) || !draws_.NextFails(spec_)) continue;
    plan.faults[i] = Fault{true, spec_.kind, draws_.Next()};
    ++injected_;
  }
  return plan;
}

absl::Status FaultyBlockIo::Run(absl::Span<const IoRequest> requests) {
  PassGate(requests);
  const Plan plan = PlanFaults(requests);
  std::vector<IoRequest> pass;
  pass.reserve(requests.size());
  absl::Status injected;
  for (size_t i = 0; i < requests.size(); ++i) {
    const Fault& f = plan.faults[i];
    IoRequest r = requests[i];
    if (f.active && f.kind != FaultKind::kBitFlip) {
      if (injected.ok()) injected = FaultStatus(f.kind, r);
      const bool short_io =
          f.kind == FaultKind::kShortRead || f.kind == FaultKind::kShortWrite;
      r.bytes = short_io ? ShortPrefix(r.bytes) : 0;
    }
    if (r.bytes > 0) pass.push_back(r);
  }
  const absl::Status status = inner_->Run(pass);
  if (!injected.ok()) return injected;
  if (!status.ok()) return status;
  for (size_t i = 0; i < requests.size(); ++i) {
    if (plan.faults[i].active) FlipBit(requests[i], plan.faults[i].draw);
  }
  return absl::OkStatus();
}

}  // namespace strata
