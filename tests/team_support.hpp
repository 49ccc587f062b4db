// Teams of threads per system (kernels/ukb/kernels/team.hpp) emulated on
// the CPU: one host thread per member, their sync a std::barrier, their
// all() and max() exchanged through one slot per member between two syncs
// (ThreadTeam, run_team); or one member at a time, in rank order or in
// reverse, between syncs (TurnTeam, run_team_in_turns), so that a missing
// sync shows every time: a member then reads what the members after it
// in the order have not written yet. emulate_team_launch runs the CUDA
// backend's team launches with them. Their all() and max() sync, which a
// GPU's vote and shuffles do not: code that relies on all() or max() to
// make earlier writes visible passes here and is wrong there (team.hpp
// says which guarantees a Team gives).
#pragma once

#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <semaphore>
#include <thread>
#include <vector>

#include "ukb/cuda/launch.hpp"

namespace ukb::test {

struct ThreadTeam {
  int r, s;
  std::barrier<>* bar;
  double* slots;  // one per member
  int rank() const { return r; }
  int size() const { return s; }
  void sync() const { bar->arrive_and_wait(); }
  bool all(bool m) const {
    slots[r] = m ? 1 : 0;
    sync();
    bool a = true;
    for (int i = 0; i < s; ++i) a = a && slots[i] != 0;
    sync();  // every member has read the slots before they are written again
    return a;
  }
  template <class T>
  T max(T x) const {
    slots[r] = static_cast<double>(x);  // float and double: exact
    sync();
    T best = static_cast<T>(slots[0]);
    for (int i = 1; i < s; ++i) {
      const T v = static_cast<T>(slots[i]);
      best = (v > best || best != best) ? v : best;  // as cuda/team.cuh's
    }
    sync();
    return best;
  }
};

// Runs f(team) on `size` threads, one per member of one team.
template <class F>
void run_team(int size, const F& f) {
  std::barrier<> bar(size);
  std::vector<double> slots(static_cast<std::size_t>(size));
  std::vector<std::thread> members;
  for (int r = 0; r < size; ++r) members.emplace_back([&, r] { f(ThreadTeam{r, size, &bar, slots.data()}); });
  for (std::thread& t : members) t.join();
}

// The turns of the members of a TurnTeam: the member at position k of the
// order (rank order, or reverse) runs until it syncs, then wakes the one
// at position k + 1 (mod size), one semaphore each: one wake-up a turn.
// A member that waits a minute for its turn stops the test with a message
// (a member returned early or missed a sync), instead of hanging.
struct Turns {
  int size = 1;
  bool reverse = false;
  std::vector<std::unique_ptr<std::binary_semaphore>> go;
  Turns(int s, bool rev) : size(s), reverse(rev) {
    for (int r = 0; r < s; ++r) go.push_back(std::make_unique<std::binary_semaphore>(0));
  }
  int position(int r) const { return reverse ? size - 1 - r : r; }
  int member(int k) const { return reverse ? size - 1 - k : k; }
};

struct TurnTeam {
  int r, s;
  Turns* turns;
  double* slots;
  int rank() const { return r; }
  int size() const { return s; }
  void wait_turn() const {
    if (!turns->go[static_cast<std::size_t>(r)]->try_acquire_for(std::chrono::seconds(60))) {
      std::fprintf(stderr, "TurnTeam: member %d of %d waited 60 s for its turn: a member returned early or missed a sync\n", r, s);
      std::abort();
    }
  }
  void pass() const {
    const int next = turns->member((turns->position(r) + 1) % s);
    turns->go[static_cast<std::size_t>(next)]->release();
  }
  void sync() const {
    pass();
    wait_turn();
  }
  bool all(bool m) const {
    slots[r] = m ? 1 : 0;
    sync();
    bool a = true;
    for (int i = 0; i < s; ++i) a = a && slots[i] != 0;
    sync();
    return a;
  }
  template <class T>
  T max(T x) const {
    slots[r] = static_cast<double>(x);
    sync();
    T best = static_cast<T>(slots[0]);
    for (int i = 1; i < s; ++i) {
      const T v = static_cast<T>(slots[i]);
      best = (v > best || best != best) ? v : best;
    }
    sync();
    return best;
  }
};

// Runs f(team) on `size` threads, one per member, one member at a time
// between syncs: in rank order, or in reverse.
template <class F>
void run_team_in_turns(int size, bool reverse, const F& f) {
  Turns turns(size, reverse);
  turns.go[static_cast<std::size_t>(turns.member(0))]->release();
  std::vector<double> slots(static_cast<std::size_t>(size));
  std::vector<std::thread> members;
  for (int r = 0; r < size; ++r)
    members.emplace_back([&, r] {
      const TurnTeam team{r, size, &turns, slots.data()};
      team.wait_turn();
      f(team);
      team.pass();
    });
  for (std::thread& t : members) t.join();
}

// A team of one member that is not SerialTeam: the team code of team.hpp
// (team_cholesky, the shares and syncs) on one thread, at the cost of one
// thread (the emulated launches' default team, emulate_team_launch).
struct SoloTeam {
  static int rank() { return 0; }
  static int size() { return 1; }
  static void sync() {}
  static bool all(bool m) { return m; }
  template <class T>
  static T max(T x) {
    return x;
  }
};

// How emulate_team_launch runs a team: one member (SoloTeam), or `size`
// host threads, free (turns 0) or taking turns in rank order (1) or in
// reverse (-1).
struct TeamMode {
  int size = 1;
  int turns = 0;
};
inline TeamMode& emulated_team_mode() {
  static TeamMode mode;
  return mode;
}
// The team launches emulate_team_launch has run.
inline long& emulated_team_launches() {
  static long launches = 0;
  return launches;
}

// The CUDA backend's team launch (UKB_LAUNCH_TEAM of kernels/ukb/cuda/
// engine_impl.hpp) on the CPU: the blocks and teams of the GPU's launch
// (cuda/launch.hpp's team geometry), one team after another, each block's
// shared memory poisoned with 0xFF bytes (NaN) before it runs, each team run
// as emulated_team_mode() says. Always launches (true).
template <class Body>
bool emulate_team_launch(int block, int N, const Body& body) {
  using Shared = typename Body::Shared;
  const int S = Body::team_threads;
  const cuda::TeamLaunchConfig c =
      cuda::team_launch_config(N, block > 0 ? block : cuda::occupancy_block(N * S, 128, 132), S);
  const TeamMode mode = emulated_team_mode();
  ++emulated_team_launches();
  const std::size_t bytes = sizeof(Shared) * static_cast<std::size_t>(c.teams);
  struct Free {
    void operator()(void* p) const { ::operator delete(p, std::align_val_t(alignof(Shared))); }
  };
  const std::unique_ptr<void, Free> memory(::operator new(bytes, std::align_val_t(alignof(Shared))));
  Shared* const shared = static_cast<Shared*>(memory.get());
  for (int b = 0; b < c.grid; ++b) {
    std::memset(memory.get(), 0xFF, bytes);
    for (int k = 0; k < c.teams; ++k) {
      const int i = cuda::team_system(b, c.teams, k, N);
      if (i < 0) continue;
      Shared& sh = shared[k];
      if (mode.size == 1 && mode.turns == 0) {
        body(SoloTeam{}, sh, i);
      } else if (mode.turns == 0) {
        run_team(mode.size, [&](const ThreadTeam& t) { body(t, sh, i); });
      } else {
        run_team_in_turns(mode.size, mode.turns < 0, [&](const TurnTeam& t) { body(t, sh, i); });
      }
    }
  }
  return true;
}

}  // namespace ukb::test
