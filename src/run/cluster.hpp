// The ranks of a distributed run (`mpirun -n P ukb run`; docs/cluster.md): what
// the driver (driver.cpp) needs of them, implemented with
// MPI in src/mpi/cluster.cpp, so that the ukb_run library itself needs no
// MPI. Internal to ukb.
//
// The work is the samples from the first one not done, in blocks of the
// config's chunk; rank 0 hands the blocks out one at a time as ranks ask
// (samples differ in cost: dynamic, not one slice per rank), integrates
// blocks itself too, merges every block's rows into the results table in
// sample order and writes every file. Sample i depends on (seed, i) alone,
// so the split changes nothing.
#pragma once

#include <string>
#include <vector>

namespace ukb::run {

class Cluster {
 public:
  virtual ~Cluster() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// This rank's index among the ranks on its node (its GPU: cuda::use_device).
  virtual int local_rank() const = 0;
  /// CPU threads per rank where the config says 0 (all cores): the node's
  /// cores shared by the ranks on it; 0 where OMP_NUM_THREADS decides.
  virtual int threads_hint() const = 0;
  /// Collective: every rank's setup error ("" for none) in, the first
  /// rank's error in rank order out, on every rank ("" when all are fine).
  /// With `engage`, from an agreement on "" until end() the ranks are
  /// engaged in one run: a rank that leaves it early (an error) ends the
  /// whole job, since the others would wait for it for ever.
  virtual std::string agree(const std::string& error, bool engage) = 0;
  /// Whether this rank is engaged in a run (see agree).
  virtual bool engaged() const = 0;
  /// The run's last collective is done: leaving is safe again.
  virtual void end() = 0;
  /// Collective: rank 0's x on every rank.
  virtual long broadcast(long x) = 0;
  /// Collective: every rank's x, in rank order, on rank 0 (empty elsewhere).
  virtual std::vector<double> gather(double x) = 0;
  /// Right after the broadcast of the start, on every rank: blocks 0 ..
  /// blocks-1 are to be integrated; rank 0 starts handing them out and
  /// collecting their rows.
  virtual void serve(long blocks) = 0;
  /// The next block for this rank; -1 when none is left or a stop was asked for.
  virtual long next_block() = 0;
  /// A block's rows, for rank 0 (kept there; sent from the other ranks).
  virtual void deliver(long block, std::vector<char> rows) = 0;
  /// No rank takes a new block from now on (a stop request on any rank).
  virtual void stop() = 0;
  /// Rank 0: the rows of a delivered block, if they have come.
  virtual bool take(long block, std::vector<char>& rows) = 0;
  /// This rank takes no more blocks; on rank 0, returns once every rank's
  /// blocks are delivered.
  virtual void finish() = 0;
};

}  // namespace ukb::run
