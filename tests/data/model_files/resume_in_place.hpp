// tests/models/test_model_files.cpp, ModelFiles.AHandlerThatResumesInPlaceFailsTheSampleNotTheRun:
// examples/models/spring_block.hpp with a handler that resumes without
// leaving the event (docs/adding-a-model.md, "The event contract").
// A model file with Coulomb friction and stick-slip (docs/adding-a-model.md): a
// block of mass m on a rough horizontal floor, held by a spring
// of stiffness k to the origin. It oscillates with amplitudes shrinking by
// 2 mu m g / k per half swing and sticks for good at the first turning point
// where the spring can no longer overcome static friction (|k x| <= mu m g).
#pragma once

#include <array>
#include <cmath>

#include "ukb/model.hpp"

template <class T>
struct SpringBlock {
  using Scalar = T;
  static constexpr const char* name = "spring_block";
  static constexpr const char* summary = "block on a spring on a rough floor: Coulomb friction, stick-slip";
  static constexpr int n = 2;  // q = (x, y)
  static constexpr int m = 1;  // on the floor: y = 0
  static constexpr std::array<const char*, n> coords{"x", "y"};
  static constexpr std::array<const char*, 2> initial_names{"x", "v"};
  static constexpr std::array<const char*, 2> initial_docs{"position along the floor", "velocity along the floor"};

  struct Params {
    T m = T(1);      // mass
    T k = T(10);     // spring stiffness
    T g = T(9.81);   // gravity along -y
    T mu = T(0.2);   // Coulomb friction coefficient (sliding and static)
  };

  template <class P, class F>
  UKB_HD static constexpr void visit_params(P& p, F&& f) {
    f("m", p.m, "block mass (> 0)");
    f("k", p.k, "spring stiffness (> 0)");
    f("g", p.g, "gravitational acceleration along -y (> 0)");
    f("mu", p.mu, "Coulomb friction coefficient (>= 0)");
  }

  UKB_HD static void mass(const T* /*q*/, T /*t*/, const Params& p, T* M) {
    M[0] = p.m, M[1] = T(0), M[2] = T(0), M[3] = p.m;
  }

  UKB_HD static void force(const T* q, const T* /*qd*/, T /*t*/, const Params& p, T* Q) {
    Q[0] = -p.k * q[0], Q[1] = -p.m * p.g;
  }

  UKB_HD static void constraints(const T* /*q*/, const T* /*qd*/, T /*t*/, const Params& /*p*/, T* A, T* b) {
    A[0] = T(0), A[1] = T(1), b[0] = T(0);
  }

  // Friction of magnitude mu |N| (N = Qc_ideal, the floor's normal force)
  // against the sliding velocity; at rest, static friction against the
  // spring up to mu |N|, beyond which the block starts to slide.
  UKB_HD static void nonideal(const T* q, const T* qd, T /*t*/, const Params& p, const T* Qc_ideal,
                              const T* /*lambda*/, T* C) {
    using std::abs;
    const T limit = p.mu * abs(Qc_ideal[1]);
    const T pull = -p.k * q[0];  // the tangential impressed force
    if (qd[0] > T(0)) C[0] = -limit;
    else if (qd[0] < T(0)) C[0] = limit;
    else C[0] = abs(pull) <= limit ? -pull : (pull > T(0) ? -limit : limit);
    C[1] = T(0);
  }

  // Optional hooks: drift monitoring, stabilisation, energy, natural
  // initial quantities, and the stick-slip event.
  UKB_HD static void residual(const T* q, const T* qd, T /*t*/, const Params& /*p*/, T& pos, T& vel) {
    using std::abs;
    pos = abs(q[1]), vel = abs(qd[1]);
  }
  static constexpr std::array<ukb::RowKind, m> row_kinds{ukb::RowKind::holonomic};
  UKB_HD static void constraint_rows(const T* q, const T* qd, T /*t*/, const Params& /*p*/, T* phi, T* phid) {
    phi[0] = q[1], phid[0] = qd[1];
  }
  UKB_HD static T potential(const T* q, T /*t*/, const Params& p) {
    return T(0.5) * p.k * q[0] * q[0] + p.m * p.g * q[1];
  }
  UKB_HD static bool initial_state(const T* ic, const Params& /*p*/, T* q, T* qd) {
    q[0] = ic[0], q[1] = T(0), qd[0] = ic[1], qd[1] = T(0);
    return true;
  }
  UKB_HD static void natural_state(const T* q, const T* qd, const Params& /*p*/, T* ic) {
    ic[0] = q[0], ic[1] = qd[0];
  }
  // The sliding velocity changes sign: at a turning point the block sticks
  // for good where static friction holds it, else it slides back.
  UKB_HD static T event(const T* /*q*/, const T* qd, T /*t*/, const Params& /*p*/) { return qd[0]; }
  UKB_HD static ukb::EventAction on_event(T* q, T* qd, T /*t*/, const Params& p) {
    (void)q, (void)qd, (void)p;
    return ukb::EventAction::resume;  // the mistake: nothing changed, the event is crossed again at once
  }
};

UKB_MODEL(SpringBlock)
