/// @file stage.hpp
/// @brief What the steppers (rk4.hpp, dopri5.hpp) share: how a stage is
///        evaluated and what its evaluation reports.
#pragma once

#include "ukb/config.hpp"
#include "ukb/kernels/lanes.hpp"
#include "ukb/kernels/uk.hpp"
#include "ukb/model.hpp"
#include "ukb/settings.hpp"

namespace ukb::kernels {

/// Stage observer that does nothing (see rk4_step).
struct NoStageObserver {
  template <class T>
  UKB_HD void operator()(const T*, const T*, T) const {}
};

/// How every evaluation of a step is done, and what it reports; V is the
/// arithmetic type of the step (the scalar T or a pack of lanes).
template <class T, class V = T>
struct StageSettings {
  T rank_rtol{};         ///< relative rank tolerance of the pseudo-inverse
  Baumgarte<T> bg{};     ///< Baumgarte stabilisation (off by default)
  /// if given: lowered to the smallest rank of B seen (per lane)
  typename Lanes<V>::Int* min_rank = nullptr;
  MaskOf<V>* inconsistent = nullptr;  ///< if given: set where an evaluation is inconsistent
  /// if given: raised to the largest rank of B seen (per lane)
  typename Lanes<V>::Int* max_rank = nullptr;
  MaskOf<V>* marginal = nullptr;  ///< if given: set where a rank decision was marginal
};

/// Records what an evaluation with status s found about B (k) in the
/// trackers of ss, for the lanes that are ok in s and in st, and merges s
/// into st (the first failure of a lane stays). False when no lane of st is
/// ok any more.
template <Model Mo, class V>
UKB_HD UKB_INLINE bool stage_record(const typename Lanes<V>::LaneStatus& s, const Accel<Mo, V>& k,
                                    const StageSettings<typename Mo::Scalar, V>& ss,
                                    typename Lanes<V>::LaneStatus& st) {
  using Lane = Lanes<V>;
  const MaskOf<V> good = Lane::ok(s) && Lane::ok(st);
  if (ss.min_rank) Lane::lower(*ss.min_rank, good, k.rank);
  if (ss.inconsistent) *ss.inconsistent = *ss.inconsistent || (good && k.inconsistent);
  if (ss.max_rank) Lane::raise(*ss.max_rank, good, k.rank);
  if (ss.marginal) *ss.marginal = *ss.marginal || (good && k.marginal);
  Lane::merge(st, s);
  return Lane::any(Lane::ok(st));
}

/// Evaluates one stage at (x, v, ts) into k: the lanes whose evaluation
/// fails get its status in st (the first failure of a lane stays), and
/// what the good lanes' evaluation found about B goes to the trackers of
/// ss (stage_record). False when no lane of st is ok any more.
template <Model Mo, class V>
UKB_HD bool stage_eval(const V* x, const V* v, const V& ts, const ParamsOf<Mo, V>& p,
                       const StageSettings<typename Mo::Scalar, V>& ss, Accel<Mo, V>& k,
                       typename Lanes<V>::LaneStatus& st) {
  return stage_record<Mo, V>(uk_eval<Mo, V>(x, v, ts, p, ss.rank_rtol, k, ss.bg), k, ss, st);
}

/// A stage's evaluation by a team (the team steps of rk4.hpp and
/// dopri5.hpp): uk_accel by the team on its shared arrays `uk` into `out`,
/// recorded into the member's trackers and status (stage_record). False
/// when the status is not ok any more.
template <Model Mo, class Team>
struct TeamStageEval {
  using T = typename Mo::Scalar;
  const Team& team;
  UkArrays<Mo, T> uk;
  const typename Mo::Params& p;
  const StageSettings<T>& ss;
  Accel<Mo, T>& out;
  Status& st;
  UKB_HD bool operator()(const T* x, const T* v, T ts) const {
    const Status s = uk_accel<Mo, T>(team, uk, x, v, ts, p, ss.rank_rtol, out, ss.bg);
    return stage_record<Mo, T>(s, out, ss, st);
  }
};

}  // namespace ukb::kernels
