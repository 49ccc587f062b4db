// The CUDA glue: built-in models evaluated as device code agree with the
// host. Runs where a CUDA device exists; skips with the reason otherwise.
#include <gtest/gtest.h>

#include "support.hpp"
#include "ukb/cuda.hpp"
#include "ukb/registry.hpp"

namespace ukb::test {
namespace {

TEST(Cuda, BuildFlagMatchesTheLibrary) {
#ifdef UKB_HAVE_CUDA
  EXPECT_TRUE(cuda::built());
#else
  EXPECT_FALSE(cuda::built());
  std::string why;
  EXPECT_EQ(cuda::device_count(&why), 0);
  EXPECT_NE(why.find("without CUDA"), std::string::npos);
#endif
}

TEST(Cuda, ModelTermsOnDeviceMatchHost) {
  std::string why;
  if (cuda::device_count(&why) == 0) GTEST_SKIP() << "no GPU here: " << why;
  for_each_model([]<class Mo>() {
    Rng rng(51);
    for (int i = 0; i < 5; ++i) {
      const Sample<Mo> s = Gen<Mo>::consistent(rng);
      std::vector<double> values;
      Mo::visit_params(s.p, [&](const char*, const double& v, const char*) { values.push_back(v); });
      const VectorXd Qc = rng.vector(Mo::n, -1, 1), lam = rng.vector(Mo::m, -1, 1);
      std::vector<double> M(Mo::n * Mo::n), Q(Mo::n), A(Mo::m * Mo::n), b(Mo::m), C(Mo::n), Ch(Mo::n);
      std::string err;
      ASSERT_TRUE(cuda::evaluate_terms(Mo::name, values.data(), s.q.data(), s.qd.data(), 0.0,
                                       Qc.data(), lam.data(), M.data(), Q.data(), A.data(),
                                       b.data(), C.data(), &err))
          << err;
      const reference::Terms k = reference::terms<Mo>(s.p, s.q, s.qd, 0);
      Mo::nonideal(s.q.data(), s.qd.data(), 0.0, s.p, Qc.data(), lam.data(), Ch.data());
      using RowMat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
      const double tol = 1e-13;
      EXPECT_LT((Eigen::Map<RowMat>(M.data(), Mo::n, Mo::n) - k.M).norm(), tol * (1 + k.M.norm())) << Mo::name;
      EXPECT_LT((Eigen::Map<VectorXd>(Q.data(), Mo::n) - k.Q).norm(), tol * (1 + k.Q.norm())) << Mo::name;
      EXPECT_LT((Eigen::Map<RowMat>(A.data(), Mo::m, Mo::n) - k.A).norm(), tol * (1 + k.A.norm())) << Mo::name;
      EXPECT_LT((Eigen::Map<VectorXd>(b.data(), Mo::m) - k.b).norm(), tol * (1 + k.b.norm())) << Mo::name;
      EXPECT_LT((Eigen::Map<VectorXd>(C.data(), Mo::n) - Eigen::Map<VectorXd>(Ch.data(), Mo::n)).norm(),
                tol * (1 + Eigen::Map<VectorXd>(Ch.data(), Mo::n).norm()))
          << Mo::name;
    }
  });
}

}  // namespace
}  // namespace ukb::test
