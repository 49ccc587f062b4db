/// @file mpi.hpp
/// @brief Distributed runs over MPI (`mpirun -n P ukb run CONFIG`;
/// docs/cluster.md): what the `ukb` executable does when MPI
///        launched it. Library ukb_mpi (built where MPI is found,
///        UKB_ENABLE_MPI).
#pragma once

#include <memory>

namespace ukb::run {
class Cluster;
}

namespace ukb::mpi {

/// True when this process was started by an MPI launcher (mpirun, mpiexec,
/// srun): its environment has the launcher's variables.
bool launched();

/// MPI for the life of the object where launched() (MPI_Init_thread, then
/// MPI_Finalize), else nothing. With more than one rank, cluster() is what
/// ExecuteOptions::cluster takes.
class Session {
 public:
  Session(int& argc, char**& argv);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  /// The ranks of this job (more than one), or null.
  run::Cluster* cluster() const;

 private:
  bool initialized_ = false;
  std::unique_ptr<run::Cluster> cluster_;
};

}  // namespace ukb::mpi
