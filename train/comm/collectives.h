// collectives.h: Collectives, the communication a sharded data-parallel run
// needs between its ranks — all-gather, point-to-point send and receive —
// started without waiting and waited for with a deadline.
//
// Sharded training (ZeRO-3: Rajbhandari et al., 2020; ZeRO-Infinity, 2021)
// splits every parameter, gradient and optimizer state into one shard per
// rank (ShardOffsets). Before a layer computes, its parameters are
// all-gathered; its gradients are reduced and each rank receives its shard.
// The reduction here is a chain in rank order, built from sends and receives
// (sharded_chain in model_sharding.cc), so the sum has the order a one-rank
// run gives; no library's reduction order is relied on.
//
// Implementations: MPI (mpi_collectives.cc, Open MPI under mpirun), NCCL
// (cuda_nccl_collectives.cc, GPU memory), one rank
// alone (LocalCollectives), and N ranks as threads of one process
// (MakeThreadCollectives, for tests: the same protocol with no launcher;
// MakeStreamOrderedCollectives, the same under NCCL's ordering rules).
// Every operation of one rank is issued from one thread at a time.
//
// The protocols built on this interface keep to NCCL's rules as well as
// MPI's, so that one protocol serves both transports: each rank's
// operations run one after another in the order it started them (one
// stream), a send completes only when its receiver has started the
// matching receive, and the messages between two ranks match in the order
// they were started, whatever their tags (NCCL has none).
#ifndef STRATA_TRAIN_COMM_COLLECTIVES_H_
#define STRATA_TRAIN_COMM_COLLECTIVES_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "strata/status.h"

namespace strata::train {

// The element offsets of `ranks` shards of a tensor of `n` elements:
// shard r is [offsets[r], offsets[r + 1]), floor(n r / ranks) to
// floor(n (r + 1) / ranks), contiguous and in rank order (sizes differ by at
// most one). ranks >= 1, n >= 0.
std::vector<int64_t> ShardOffsets(int64_t n, int ranks);

// ShardOffsets in bytes of `element` bytes each: the offsets an all-gather
// of the shards takes.
std::vector<uint64_t> ShardByteOffsets(int64_t n, int ranks, uint64_t element);

class Collectives {
 public:
  // An operation started and not yet waited for.
  using Request = int64_t;

  virtual ~Collectives() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // What runs the ranks: "mpi", "local", "threads".
  virtual std::string name() const = 0;

  // All-gather: rank r contributes `mine` (offsets[r + 1] - offsets[r]
  // bytes); every rank receives every contribution into `all` at its
  // offset (offsets[size()] bytes). offsets has size() + 1 byte offsets,
  // the same on every rank, and every rank starts its all-gathers in the
  // same order. `what` names it in errors. Both buffers stay valid until
  // Wait. InvalidArgument for bad offsets.
  virtual absl::StatusOr<Request> StartAllGather(
      const void* mine, void* all, std::span<const uint64_t> offsets,
      const std::string& what) = 0;

  // Sends `bytes` to rank `to` under `tag` (>= 0); the receiver names the
  // same tag and size. Messages of one (sender, tag) arrive in order.
  // `data` stays valid until Wait.
  virtual absl::StatusOr<Request> StartSend(int to, int tag, const void* data,
                                            uint64_t bytes,
                                            const std::string& what) = 0;
  // Receives exactly `bytes` from rank `from` under `tag` into `data`.
  virtual absl::StatusOr<Request> StartRecv(int from, int tag, void* data,
                                            uint64_t bytes,
                                            const std::string& what) = 0;

  // Waits for `request` to complete. DeadlineExceeded after the timeout
  // the implementation was made with, naming the operation and the peer (a
  // rank that stopped or is stuck: the run should end, not retry);
  // DataLoss for a message of another size; NotFound for an unknown
  // request.
  virtual absl::Status Wait(Request request) = 0;

  // The seconds a Wait waits before DeadlineExceeded (0: one that never
  // waits for a peer, LocalCollectives).
  virtual double timeout_seconds() const { return 0; }

  // A GPU transport (NCCL) starts each operation after the work queued on
  // `compute_stream` (a cudaStream_t) at the time, and Wait makes that
  // stream wait for the operation: the model that computes on it calls
  // this once, at creation. The CPU transports ignore it.
  virtual void OrderAfter(void* compute_stream) { (void)compute_stream; }

  // Bytes this rank has sent so far: an all-gather counts its contribution
  // once per other rank (what a ring or direct exchange moves), a send its
  // size.
  virtual uint64_t bytes_sent() const = 0;
};

// Waits for the requests of `requests` in order and clears it; at the first
// error, returns it at once (the rest are left unwaited: the caller's pass
// is abandoned), so a stuck peer costs one timeout, not one per request.
absl::Status WaitAll(Collectives& c,
                     std::vector<Collectives::Request>& requests);

// Every rank's `mine`, in rank order: one all-gather of a value, started
// and waited for (collective; `what` names it in errors).
template <typename T>
absl::StatusOr<std::vector<T>> AllGatherValue(Collectives& c, const T& mine,
                                              const std::string& what) {
  static_assert(std::is_trivially_copyable_v<T>);
  std::vector<T> all(c.size());
  std::vector<uint64_t> offsets;
  for (int r = 0; r <= c.size(); ++r) offsets.push_back(r * sizeof(T));
  STRATA_ASSIGN_OR_RETURN(Collectives::Request request,
                          c.StartAllGather(&mine, all.data(), offsets, what));
  STRATA_RETURN_IF_ERROR(c.Wait(request));
  return all;
}

// What a wait that ran out of time returns, the same from every transport:
// DeadlineExceeded naming the waiting rank, the operation, the peer waited
// for (-1: an all-gather, every other rank) and --collective-timeout.
absl::Status CollectiveTimeout(int rank, double timeout_seconds,
                               const std::string& what, int peer);

// One rank alone: all-gathers copy, sends and receives have no peer
// (InvalidArgument).
std::unique_ptr<Collectives> MakeLocalCollectives();

// `ranks` ranks as threads of this process, sharing memory: element r is
// rank r's, to be used by one thread. Waits time out after
// `timeout_seconds`. ranks >= 1.
std::vector<std::unique_ptr<Collectives>> MakeThreadCollectives(
    int ranks, double timeout_seconds);

// `ranks` ranks as threads of this process under NCCL's rules (see the
// top): each rank's operations complete one at a time, in the order
// started; a send and a receive meet only when each is the next operation
// of its rank; an all-gather when it is the next of every rank. So a
// protocol that would deadlock on NCCL times out here, and one whose
// messages between a pair are started in different orders on the two sides
// fails with DataLoss naming both, where NCCL would deliver the wrong
// bytes. Sends and contributions are copied when started; a receive's
// buffer is written when it meets its send and must stay valid until Wait.
// Timeouts name each rank's next operation.
std::vector<std::unique_ptr<Collectives>> MakeStreamOrderedCollectives(
    int ranks, double timeout_seconds);

// InvalidArgument unless rank `rank` of `ranks` may exchange with `peer`
// under `tag` (another rank, a tag >= 0; what StartSend/StartRecv take).
absl::Status CheckPointToPoint(int rank, int ranks, int peer, int tag,
                               const std::string& what);

// InvalidArgument unless `offsets` are `ranks` + 1 byte offsets from 0,
// never decreasing (what StartAllGather takes).
absl::Status CheckAllGatherOffsets(std::span<const uint64_t> offsets,
                                   int ranks);

// MPI_COMM_WORLD, initialising MPI (thread level serialized) on first use
// and finalising it when the object is destroyed. Waits time out after
// `timeout_seconds`. FailedPrecondition when strata was built without MPI;
// Internal for an MPI error.
absl::StatusOr<std::unique_ptr<Collectives>> MakeMpiCollectives(
    double timeout_seconds);

// NCCL (GPUs): this rank's communicator among bootstrap.size() ranks, on
// the current CUDA device (one device per rank: NCCL does not take two
// ranks on one GPU). `bootstrap` (MPI, or local for one rank) carries
// rank 0's ncclUniqueId to the others and is used only here. Each
// operation runs on a stream of the communicator's own after the work the
// OrderAfter stream (until then the legacy default stream) had queued when
// it was started, and Wait makes that stream wait for it. Buffers in host
// memory
// (pageable or pinned) are staged through GPU memory: read when the
// operation starts, written at Wait. NCCL has
// no tags and no message sizes on the wire: a protocol must start the
// messages between two ranks in the same order on both sides, and sizes
// must agree (not checked: NCCL cannot). Waits time out after
// `timeout_seconds` and then abort the communicator (every later operation
// is FailedPrecondition). FailedPrecondition without CUDA, without a
// device, or where libnccl.so.2 cannot be loaded; Internal for an NCCL
// error.
absl::StatusOr<std::unique_ptr<Collectives>> MakeNcclCollectives(
    Collectives& bootstrap, double timeout_seconds);

// Ends every rank of an MPI run at once (MPI_Abort) after a rank's error,
// so none waits for it; a no-op outside MPI.
void AbortMpiRun(int exit_code);

}  // namespace strata::train

#endif  // STRATA_TRAIN_COMM_COLLECTIVES_H_
