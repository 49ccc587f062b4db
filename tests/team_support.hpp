// Teams of threads per system (kernels/ukb/kernels/team.hpp) emulated on
// the CPU: one host thread per member, their sync a std::barrier, their
// all() and max() exchanged through one slot per member between two syncs.
#pragma once

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

}  // namespace ukb::test
