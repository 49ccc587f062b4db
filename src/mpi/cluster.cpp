// The ranks of a distributed run over MPI (src/run/cluster.hpp): rank 0
// hands out blocks and collects their rows with a service thread, so that
// the ranks never wait for rank 0's own block to finish; the other ranks
// ask for a block, integrate it and send its rows.
#include "ukb/mpi.hpp"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "cluster.hpp"

namespace ukb::mpi {
namespace {

enum Tag : int { ask = 1, give, rows_tag, stop_tag, done_tag };

class MpiCluster final : public run::Cluster {
 public:
  MpiCluster() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    MPI_Comm local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local);
    MPI_Comm_size(local, &local_size_);
    MPI_Comm_rank(local, &local_rank_);
    MPI_Comm_free(&local);
  }

  ~MpiCluster() override {
    // A rank that leaves a run before its end (an error, printed by the CLI)
    // takes the job down: the others would wait for it for ever. (With
    // MPI_THREAD_MULTIPLE, legal while rank 0's service thread is in MPI.)
    if (engaged_) {
      std::fprintf(stderr, "ukb run: rank %d of %d stopped before the end of the run; ending every rank "
                           "(the last checkpoint, if any, stays: ukb run --resume continues)\n", rank_, size_);
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
    if (server_.joinable()) server_.join();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }

  int threads_hint() const override {
    if (const char* env = std::getenv("OMP_NUM_THREADS"); env && *env) return 0;
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return static_cast<int>(std::max(1L, cores / std::max(1, local_size_)));
  }

  std::string agree(const std::string& error, bool engage) override {
    int mine = error.empty() ? size_ : rank_, first = size_;
    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    engaged_ = engage && first == size_;
    if (first == size_) return "";
    std::string msg = rank_ == first ? error : std::string();
    long len = static_cast<long>(msg.size());
    MPI_Bcast(&len, 1, MPI_LONG, first, MPI_COMM_WORLD);
    msg.resize(static_cast<std::size_t>(len));
    MPI_Bcast(msg.data(), static_cast<int>(len), MPI_CHAR, first, MPI_COMM_WORLD);
    return first == 0 ? msg : "rank " + std::to_string(first) + ": " + msg;
  }

  bool engaged() const override { return engaged_; }
  void end() override { engaged_ = false; }

  long broadcast(long x) override {
    MPI_Bcast(&x, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    return x;
  }

  std::vector<double> gather(double x) override {
    std::vector<double> all(rank_ == 0 ? static_cast<std::size_t>(size_) : 0);
    MPI_Gather(&x, 1, MPI_DOUBLE, all.data(), 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    return all;
  }

  void serve(long blocks) override {
    blocks_ = blocks;
    next_ = 0;
    stopped_ = false;
    stop_sent_ = false;
    rows_.clear();
    // UKB_MPI_BLOCKS=static: rank r takes blocks r, r + P, r + 2P, ... (a
    // fixed split, to measure what the dynamic one gains; docs/cluster.md).
    const char* mode = std::getenv("UKB_MPI_BLOCKS");
    fixed_ = mode && std::strcmp(mode, "static") == 0;
    taken_.assign(static_cast<std::size_t>(size_), 0);
    if (rank_ == 0) server_ = std::thread([this] { loop(); });
  }

  long next_block() override {
    if (rank_ == 0) return hand_out(0);
    long b = 0;
    MPI_Send(&b, 1, MPI_LONG, 0, ask, MPI_COMM_WORLD);
    MPI_Recv(&b, 1, MPI_LONG, 0, give, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    return b;
  }

  void deliver(long block, std::vector<char> rows) override {
    if (rank_ == 0) {
      std::lock_guard<std::mutex> lock(mutex_);
      rows_[block] = std::move(rows);
      return;
    }
    if (rows.size() > static_cast<std::size_t>(INT_MAX) - 8)
      throw std::runtime_error("a block's rows exceed 2 GB; expected a smaller integrator.chunk");
    std::vector<char> msg(8 + rows.size());
    std::memcpy(msg.data(), &block, 8);
    std::memcpy(msg.data() + 8, rows.data(), rows.size());
    MPI_Send(msg.data(), static_cast<int>(msg.size()), MPI_BYTE, 0, rows_tag, MPI_COMM_WORLD);
  }

  void stop() override {
    if (rank_ == 0) {
      stopped_ = true;
    } else if (!stop_sent_) {
      stop_sent_ = true;
      long x = 0;
      MPI_Send(&x, 1, MPI_LONG, 0, stop_tag, MPI_COMM_WORLD);
    }
  }

  bool take(long block, std::vector<char>& rows) override {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = rows_.find(block);
    if (it == rows_.end()) return false;
    rows = std::move(it->second);
    rows_.erase(it);
    return true;
  }

  void finish() override {
    if (rank_ == 0) {
      if (server_.joinable()) server_.join();
    } else {
      long x = 0;
      MPI_Send(&x, 1, MPI_LONG, 0, done_tag, MPI_COMM_WORLD);
    }
  }

 private:
  // The next block for rank r (rank 0's own thread asks for r = 0, the
  // service thread for the others: each element of taken_ has one writer).
  long hand_out(int r) {
    if (stopped_) return -1;
    const long k = fixed_ ? r + size_ * taken_[static_cast<std::size_t>(r)]++ : next_.fetch_add(1);
    return k < blocks_ ? k : -1;
  }

  // Rank 0's service: answers requests for blocks, keeps the rows that come,
  // until every other rank has said it is done. Polls with short sleeps (a
  // blocking receive would spin a core away from rank 0's own block).
  void loop() {
    int done = 0;
    while (done < size_ - 1) {
      int flag = 0;
      MPI_Status st;
      MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
      if (!flag) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        continue;
      }
      if (st.MPI_TAG == rows_tag) {
        int bytes = 0;
        MPI_Get_count(&st, MPI_BYTE, &bytes);
        std::vector<char> msg(static_cast<std::size_t>(bytes));
        MPI_Recv(msg.data(), bytes, MPI_BYTE, st.MPI_SOURCE, rows_tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        long block = 0;
        std::memcpy(&block, msg.data(), 8);
        std::lock_guard<std::mutex> lock(mutex_);
        rows_[block].assign(msg.begin() + 8, msg.end());
        continue;
      }
      long x = 0;
      MPI_Recv(&x, 1, MPI_LONG, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      if (st.MPI_TAG == ask) {
        const long b = hand_out(st.MPI_SOURCE);
        MPI_Send(&b, 1, MPI_LONG, st.MPI_SOURCE, give, MPI_COMM_WORLD);
      } else if (st.MPI_TAG == stop_tag) {
        stopped_ = true;
      } else if (st.MPI_TAG == done_tag) {
        ++done;
      }
    }
  }

  int rank_ = 0, size_ = 1, local_size_ = 1, local_rank_ = 0;
  long blocks_ = 0;
  bool engaged_ = false, stop_sent_ = false, fixed_ = false;
  std::vector<long> taken_;
  std::atomic<long> next_{0};
  std::atomic<bool> stopped_{false};
  std::thread server_;
  std::mutex mutex_;
  std::map<long, std::vector<char>> rows_;
};

}  // namespace

bool launched() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"})
    if (const char* s = std::getenv(v); s && *s) return true;
  return false;
}

Session::Session(int& argc, char**& argv) {
  if (!launched()) return;
  // Rank 0's service thread and its main thread take turns in MPI
  // (SERIALIZED); MULTIPLE where there is, so that an error can end the job
  // while the service thread waits in MPI.
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  initialized_ = true;
  int size = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (size > 1 && provided < MPI_THREAD_SERIALIZED) {
    if (rank == 0)
      std::fprintf(stderr, "ukb: this MPI library gives no thread support (MPI_THREAD_SERIALIZED), which "
                           "distributed runs need; run one process, or use an MPI built with threads\n");
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
  if (size > 1) cluster_ = std::make_unique<MpiCluster>();
}

Session::~Session() {
  cluster_.reset();
  if (initialized_) MPI_Finalize();
}

run::Cluster* Session::cluster() const { return cluster_.get(); }

}  // namespace ukb::mpi
