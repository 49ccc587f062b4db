// Helpers for the engine tests: fill a batch with random systems of a model
// and compare a batch with the reference.
#pragma once

#include "support.hpp"
#include "ukb/engine.hpp"

namespace ukb::test {

/// A batch of model Mo (at scalar T) filled with random consistent systems
/// generated in double by Gen<double model>.
template <template <class> class Model, class T = double>
struct RandomBatch {
  using MoD = Model<double>;
  using Mo = Model<T>;
  std::vector<Sample<MoD>> samples;
  Batch<Mo> batch;

  RandomBatch(int N, unsigned long seed) : batch(N) {
    samples.reserve(N);
    Rng rng(seed);
    for (int i = 0; i < N; ++i) samples.push_back(Gen<MoD>::consistent(rng));
    for (int i = 0; i < N; ++i) set(i, samples[i]);
  }
  void set(int i, const Sample<MoD>& s) {
    typename Mo::Params p{};
    std::vector<double> values;
    MoD::visit_params(s.p, [&](const char*, const double& v, const char*) { values.push_back(v); });
    std::size_t k = 0;
    Mo::visit_params(p, [&](const char*, T& f, const char*) { f = static_cast<T>(values[k++]); });
    batch.set_params(i, p);
    std::vector<T> q(Mo::n), qd(Mo::n);
    for (int j = 0; j < Mo::n; ++j) q[j] = static_cast<T>(s.q(j)), qd[j] = static_cast<T>(s.qd(j));
    batch.set_state(i, q.data(), qd.data(), static_cast<T>(s.t));
  }
};

/// Calls f.template operator()<Model>() for TestedModels' model templates
/// (support.hpp: every built-in model, ModelKinds' under the sanitizers).
/// These per-model instances dominate the compile of the engine and
/// emulation tests.
template <class F>
void for_each_model_template(F&& f) {
  TestedModels::for_each_template(f);
}

/// Max over systems of |x_i - y_i| / max(|y_i|, 1) for a per-system vector
/// read through get(batch, i, j), j < len.
template <class B1, class B2, class Get>
double max_rel_diff(const B1& x, const B2& y, int len, Get get) {
  double worst = 0;
  for (int i = 0; i < y.size(); ++i) {
    double d = 0, r = 0;
    for (int j = 0; j < len; ++j) {
      const double a = get(x, i, j), b = get(y, i, j);
      d += (a - b) * (a - b);
      r += b * b;
    }
    worst_of(worst, std::sqrt(d) / std::max(std::sqrt(r), 1.0));
  }
  return worst;
}

/// Bitwise equality of the state and status of two batches.
template <class B>
bool same_bits(const B& a, int ia, const B& b, int ib, int n) {
  if (a.status(ia) != b.status(ib) || a.t(ia) != b.t(ib)) return false;
  for (int j = 0; j < n; ++j)
    if (a.q(ia, j) != b.q(ib, j) || a.qd(ia, j) != b.qd(ib, j)) return false;
  return true;
}

}  // namespace ukb::test
