// Teams of threads per system (kernels/ukb/kernels/team.hpp) emulated on
// the CPU: one host thread per member, their sync a std::barrier, their
// all() and max() exchanged through one slot per member between two syncs
// (ThreadTeam, run_team); or one member at a time, in rank order or in
// reverse, between syncs (TurnTeam, run_team_in_turns), so that a missing
// sync shows every time: a member then reads what the members after it
// in the order have not written yet.
#pragma once

#include <atomic>
#include <barrier>
#include <thread>
#include <vector>

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

// The turn of the members of a TurnTeam: turn k belongs to the member at
// position k mod size of the order (rank order, or reverse). The waiting
// members yield (a condition variable's wake-ups of every member at every
// turn cost more than the work on two cores).
struct Turns {
  std::atomic<long> turn{0};
  int size = 1;
  bool reverse = false;
  int member(long k) const { return reverse ? size - 1 - int(k % size) : int(k % size); }
};

struct TurnTeam {
  int r, s;
  Turns* turns;
  double* slots;
  int rank() const { return r; }
  int size() const { return s; }
  void wait_turn() const {
    while (turns->member(turns->turn.load(std::memory_order_acquire)) != r) std::this_thread::yield();
  }
  void pass() const { turns->turn.fetch_add(1, std::memory_order_acq_rel); }
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
  Turns turns;
  turns.size = size;
  turns.reverse = reverse;
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

}  // namespace ukb::test
