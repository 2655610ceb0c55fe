// cuda_nccl_collectives.cc: Collectives over NCCL (see MakeNcclCollectives
// in collectives.h), for ranks whose buffers are in GPU memory.
//
// NCCL is loaded when first asked for (dlopen of libnccl.so.2, from the CUDA
// toolkit or the nvidia-nccl wheel), so strata runs where it is absent and
// says so only to a run that wants it. The communicator is non-blocking
// (ncclConfig_t::blocking = 0): no call waits for a peer, so every wait has
// a deadline, and a rank that stopped is met by ncclCommAbort, not a hang.
//
// The operations run on a stream of the communicator's own, in the order
// started, each after the work the compute stream had queued when it was
// started (an event), so the bytes a kernel wrote are the bytes sent. Host
// buffers (a loss, a norm, a shard leased on the host) are staged through
// GPU memory: copied in when started, out at Wait. All-
// gathers of unequal shards are one group of broadcasts, one per rank
// (ncclAllGather takes equal counts only). Sends and receives carry no tag:
// the protocol must start them in the same order on both sides, as the
// sharded models do (ShardedGptTest.TheProtocolKeepsToNcclOrderingRules).
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nccl.h>

#include <chrono>
#include <map>
#include <thread>

#include "absl/strings/str_format.h"
#include "base/cuda_status.h"
#include "strata/status.h"
#include "train/comm/collectives.h"

namespace strata::train {
namespace {

// The NCCL entry points strata calls, from the library loaded at run time.
struct NcclApi {
  decltype(&ncclGetVersion) get_version;
  decltype(&ncclGetErrorString) error_string;
  decltype(&ncclGetLastError) last_error;
  decltype(&ncclGetUniqueId) get_unique_id;
  decltype(&ncclCommInitRankConfig) init_rank_config;
  decltype(&ncclCommGetAsyncError) async_error;
  decltype(&ncclCommFinalize) finalize;
  decltype(&ncclCommDestroy) destroy;
  decltype(&ncclCommAbort) abort;
  decltype(&ncclGroupStart) group_start;
  decltype(&ncclGroupEnd) group_end;
  decltype(&ncclBroadcast) broadcast;
  decltype(&ncclSend) send;
  decltype(&ncclRecv) recv;
};

template <typename F>
bool Bind(void* lib, const char* name, F* out) {
  *out = reinterpret_cast<F>(dlsym(lib, name));
  return *out != nullptr;
}

absl::StatusOr<const NcclApi*> LoadNccl() {
  static const absl::StatusOr<const NcclApi*> api =
      []() -> absl::StatusOr<const NcclApi*> {
    void* lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "NCCL is not found (%s): install NCCL (the CUDA toolkit's, or the "
          "nvidia-nccl wheel) and add its lib folder to LD_LIBRARY_PATH",
          dlerror()));
    }
    auto* a = new NcclApi;  // lives as long as the process, like the library
    const bool ok = Bind(lib, "ncclGetVersion", &a->get_version) &&
                    Bind(lib, "ncclGetErrorString", &a->error_string) &&
                    Bind(lib, "ncclGetLastError", &a->last_error) &&
                    Bind(lib, "ncclGetUniqueId", &a->get_unique_id) &&
                    Bind(lib, "ncclCommInitRankConfig", &a->init_rank_config) &&
                    Bind(lib, "ncclCommGetAsyncError", &a->async_error) &&
                    Bind(lib, "ncclCommFinalize", &a->finalize) &&
                    Bind(lib, "ncclCommDestroy", &a->destroy) &&
                    Bind(lib, "ncclCommAbort", &a->abort) &&
                    Bind(lib, "ncclGroupStart", &a->group_start) &&
                    Bind(lib, "ncclGroupEnd", &a->group_end) &&
                    Bind(lib, "ncclBroadcast", &a->broadcast) &&
                    Bind(lib, "ncclSend", &a->send) &&
                    Bind(lib, "ncclRecv", &a->recv);
    if (!ok) {
      delete a;
      return absl::FailedPreconditionError(
          "the NCCL found is older than 2.14 (it lacks non-blocking "
          "communicators): install a newer NCCL");
    }
    return a;
  }();
  return api;
}

using Clock = std::chrono::steady_clock;

class NcclCollectives final : public Collectives {
 public:
  NcclCollectives(const NcclApi* api, int rank, int size, double timeout)
      : api_(api), rank_(rank), size_(size), timeout_(timeout) {}

  ~NcclCollectives() override {
    for (auto& [r, p] : pending_) {
      // Unwaited: the staging memory goes with the stream's work.
      if (p.staged_out != nullptr) cudaFreeAsync(p.staged_out, stream_);
      DestroyEvents(p);
    }
    if (comm_ != nullptr) {
      // Finalize flushes what was started; past the deadline (a peer gone)
      // abort frees it instead of waiting for ever.
      const ncclResult_t rc = api_->finalize(comm_);
      const bool clean = (rc == ncclSuccess || rc == ncclInProgress) &&
                         Settle("the NCCL communicator's finalize").ok();
      (clean ? api_->destroy : api_->abort)(comm_);
    }
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    if (copy_ != nullptr) cudaStreamDestroy(copy_);
  }

  // The communicator of `size` ranks named by `id`, on the current device.
  absl::Status Init(const ncclUniqueId& id) {
    STRATA_CUDA_RETURN_IF_ERROR(
        cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    STRATA_CUDA_RETURN_IF_ERROR(
        cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    const ncclResult_t rc =
        api_->init_rank_config(&comm_, size_, id, rank_, &config);
    if (rc != ncclSuccess && rc != ncclInProgress) {
      return Error(rc, "ncclCommInitRankConfig");
    }
    return Settle("the NCCL communicator's set-up");
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "nccl"; }
  double timeout_seconds() const override { return timeout_; }
  void OrderAfter(void* compute_stream) override {
    compute_ = static_cast<cudaStream_t>(compute_stream);
  }

  absl::StatusOr<Request> StartAllGather(const void* mine, void* all,
                                         std::span<const uint64_t> offsets,
                                         const std::string& what) override {
    STRATA_RETURN_IF_ERROR(CheckAllGatherOffsets(offsets, size_));
    const uint64_t my_bytes = offsets[rank_ + 1] - offsets[rank_];
    return Enqueue(
        what, -1, {mine, my_bytes}, {all, offsets[size_]},
        [&](const void* in, void* out) -> ncclResult_t {
          if (ncclResult_t rc = api_->group_start(); rc != ncclSuccess) {
            return rc;
          }
          for (int r = 0; r < size_; ++r) {
            const ncclResult_t rc = api_->broadcast(
                in, static_cast<char*>(out) + offsets[r],
                offsets[r + 1] - offsets[r], ncclChar, r, comm_, stream_);
            if (rc != ncclSuccess && rc != ncclInProgress) {
              api_->group_end();
              return rc;
            }
          }
          return api_->group_end();
        },
        my_bytes*(size_ - 1));
  }

  absl::StatusOr<Request> StartSend(int to, int tag, const void* data,
                                    uint64_t bytes,
                                    const std::string& what) override {
    STRATA_RETURN_IF_ERROR(CheckPeer(to, tag, what));
    return Enqueue(
        what, to, {data, bytes}, {},
        [&](const void* in, void*) {
          return api_->send(in, bytes, ncclChar, to, comm_, stream_);
        },
        bytes);
  }

  absl::StatusOr<Request> StartRecv(int from, int tag, void* data,
                                    uint64_t bytes,
                                    const std::string& what) override {
    STRATA_RETURN_IF_ERROR(CheckPeer(from, tag, what));
    return Enqueue(
        what, from, {}, {data, bytes},
        [&](const void*, void* out) {
          return api_->recv(out, bytes, ncclChar, from, comm_, stream_);
        },
        0);
  }

  absl::Status Wait(Request r) override {
    auto it = pending_.find(r);
    if (it == pending_.end()) return absl::NotFoundError("unknown request");
    Pending p = it->second;
    pending_.erase(it);
    // After an abort its event may never fire: the abort's cause, at once.
    absl::Status status = failed_.ok() ? AwaitEvent(p) : failed_;
    if (status.ok() && p.host_out != nullptr) {
      // Out of the staging buffer, on a stream of its own: the
      // communicator's may hold later operations still waiting on peers.
      status = CudaStatus(cudaStreamWaitEvent(copy_, p.done, 0), "wait");
      if (status.ok()) {
        status =
            CudaStatus(cudaMemcpyAsync(p.host_out, p.staged_out, p.out_bytes,
                                       cudaMemcpyDefault, copy_),
                       "cudaMemcpyAsync of " + p.what);
      }
      if (status.ok()) {
        status = CudaStatus(cudaStreamSynchronize(copy_), p.what);
      }
    } else if (status.ok()) {
      // The compute stream reads what arrived after it.
      status = CudaStatus(cudaStreamWaitEvent(compute_, p.done, 0),
                          "cudaStreamWaitEvent");
    }
    if (p.staged_out != nullptr) cudaFreeAsync(p.staged_out, copy_);
    DestroyEvents(p);
    return status;
  }

  uint64_t bytes_sent() const override { return sent_; }

 private:
  // A buffer an operation reads or writes; host memory is staged through
  // GPU memory (NCCL moves GPU memory only).
  struct Buffer {
    const void* data = nullptr;
    uint64_t bytes = 0;
  };
  struct Pending {
    cudaEvent_t done = nullptr;
    int peer = -1;
    std::string what;
    void* staged_out = nullptr;  // GPU copy of a host result, or null
    void* host_out = nullptr;    // where it goes at Wait
    uint64_t out_bytes = 0;
  };

  // Starts `start(in, out)` (NCCL calls on stream_, given GPU pointers)
  // after the compute stream's work so far; counts `sent` bytes.
  template <typename Start>
  absl::StatusOr<Request> Enqueue(const std::string& what, int peer, Buffer in,
                                  Buffer out, const Start& start,
                                  uint64_t sent) {
    STRATA_RETURN_IF_ERROR(failed_);
    Pending p{.peer = peer, .what = what};
    void* staged_in = nullptr;
    absl::Status s = After(compute_, stream_);
    const void* in_dev = in.data;
    void* out_dev = const_cast<void*>(out.data);
    if (s.ok() && in.bytes > 0 && !OnDevice(in.data)) {
      // Pageable or pinned host memory: copied to staging memory at once.
      s = CudaStatus(cudaMallocAsync(&staged_in, in.bytes, stream_),
                     "cudaMallocAsync");
      if (s.ok()) {
        s = CudaStatus(cudaMemcpyAsync(staged_in, in.data, in.bytes,
                                       cudaMemcpyDefault, stream_),
                       "cudaMemcpyAsync of " + what);
      }
      in_dev = staged_in;
    }
    if (s.ok() && out.bytes > 0 && !OnDevice(out.data)) {
      s = CudaStatus(cudaMallocAsync(&p.staged_out, out.bytes, stream_),
                     "cudaMallocAsync");
      p.host_out = out_dev;
      p.out_bytes = out.bytes;
      out_dev = p.staged_out;
    }
    if (s.ok()) {
      const ncclResult_t rc = start(in_dev, out_dev);
      if (rc != ncclSuccess && rc != ncclInProgress) s = Error(rc, what);
    }
    if (s.ok()) s = Settle(what);  // enqueued on the stream
    if (staged_in != nullptr) cudaFreeAsync(staged_in, stream_);
    if (s.ok()) {
      s = CudaStatus(cudaEventCreateWithFlags(&p.done, cudaEventDisableTiming),
                     "cudaEventCreateWithFlags");
    }
    if (s.ok()) s = CudaStatus(cudaEventRecord(p.done, stream_), "record");
    if (!s.ok()) {
      if (p.staged_out != nullptr) cudaFreeAsync(p.staged_out, stream_);
      DestroyEvents(p);
      return Fail(s);
    }
    // The staging buffer of a result is freed at Wait, after its copy.
    sent_ += sent;
    pending_.emplace(next_, std::move(p));
    return next_++;
  }

  // `later` runs what it is given next after the work queued on `earlier`.
  static absl::Status After(cudaStream_t earlier, cudaStream_t later) {
    cudaEvent_t ready = nullptr;
    STRATA_CUDA_RETURN_IF_ERROR(
        cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
    absl::Status s =
        CudaStatus(cudaEventRecord(ready, earlier), "cudaEventRecord");
    if (s.ok()) {
      s = CudaStatus(cudaStreamWaitEvent(later, ready, 0),
                     "cudaStreamWaitEvent");
    }
    cudaEventDestroy(ready);  // the wait holds what it needs
    return s;
  }

  // GPU (or managed) memory NCCL can move; host memory is staged.
  static bool OnDevice(const void* p) {
    cudaPointerAttributes a{};
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
  }

  // Polls until the communicator has no call in progress (a non-blocking
  // communicator's calls return before they are done), against the timeout.
  absl::Status Settle(const std::string& what) {
    const auto deadline =
        Clock::now() + std::chrono::duration<double>(timeout_);
    for (;;) {
      ncclResult_t state = ncclSuccess;
      if (const ncclResult_t rc = api_->async_error(comm_, &state);
          rc != ncclSuccess) {
        return Error(rc, what);
      }
      if (state == ncclSuccess) return absl::OkStatus();
      if (state != ncclInProgress) return Error(state, what);
      if (Clock::now() > deadline) {
        return CollectiveTimeout(rank_, timeout_, what, -1);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  absl::Status AwaitEvent(const Pending& p) {
    const auto deadline =
        Clock::now() + std::chrono::duration<double>(timeout_);
    for (;;) {
      const cudaError_t e = cudaEventQuery(p.done);
      if (e == cudaSuccess) return absl::OkStatus();
      if (e != cudaErrorNotReady) return Fail(CudaStatus(e, p.what));
      ncclResult_t state = ncclSuccess;
      api_->async_error(comm_, &state);
      if (state != ncclSuccess && state != ncclInProgress) {
        return Fail(Error(state, p.what));
      }
      if (Clock::now() > deadline) {
        return Fail(CollectiveTimeout(rank_, timeout_, p.what, p.peer));
      }
      // Polling, not spinning: the host optimizer shares these cores.
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  // After an error nothing enqueued can be trusted (NCCL's rule): the
  // communicator is aborted and every later operation refused.
  absl::Status Fail(absl::Status s) {
    if (failed_.ok()) {
      failed_ = absl::FailedPreconditionError(absl::StrFormat(
          "the NCCL communicator was aborted after an earlier error (%s): "
          "end the run",
          s.message()));
      if (comm_ != nullptr) api_->abort(comm_);
      comm_ = nullptr;
    }
    return s;
  }

  absl::Status Error(ncclResult_t rc, const std::string& what) const {
    return absl::InternalError(absl::StrFormat("%s: NCCL error: %s (%s)", what,
                                               api_->error_string(rc),
                                               api_->last_error(comm_)));
  }

  absl::Status CheckPeer(int peer, int tag, const std::string& what) const {
    return CheckPointToPoint(rank_, size_, peer, tag, what);
  }

  static void DestroyEvents(Pending& p) {
    if (p.done != nullptr) cudaEventDestroy(p.done);
    p.done = nullptr;
  }

  const NcclApi* const api_;
  const int rank_, size_;
  const double timeout_;
  cudaStream_t compute_ = nullptr;  // OrderAfter's
  cudaStream_t stream_ = nullptr;
  cudaStream_t copy_ = nullptr;  // staged results to the host
  ncclComm_t comm_ = nullptr;
  absl::Status failed_;
  Request next_ = 0;
  std::map<Request, Pending> pending_;
  uint64_t sent_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Collectives>> MakeNcclCollectives(
    Collectives& bootstrap, double timeout_seconds) {
  STRATA_ASSIGN_OR_RETURN(const NcclApi* api, LoadNccl());
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    return absl::FailedPreconditionError(
        "NCCL needs a CUDA device and none is visible");
  }
  // Rank 0's id reaches every rank through the bootstrap transport.
  ncclUniqueId id{};
  if (bootstrap.rank() == 0) {
    if (const ncclResult_t rc = api->get_unique_id(&id); rc != ncclSuccess) {
      return absl::InternalError(absl::StrFormat(
          "ncclGetUniqueId: NCCL error: %s", api->error_string(rc)));
    }
  }
  STRATA_ASSIGN_OR_RETURN(
      const std::vector<ncclUniqueId> ids,
      AllGatherValue(bootstrap, id, "the all-gather of NCCL's unique id"));
  auto nccl = std::make_unique<NcclCollectives>(
      api, bootstrap.rank(), bootstrap.size(), timeout_seconds);
  STRATA_RETURN_IF_ERROR(nccl->Init(ids[0]));
  return std::unique_ptr<Collectives>(std::move(nccl));
}

}  // namespace strata::train
