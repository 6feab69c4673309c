#include "client/blas/blas_layout.h"

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace gemm::client {
namespace {

// The reference BLAS's column-major SGEMM, in double, written from its
// definition: C(i,j) = alpha sum_p op(A)(i,p) op(B)(p,j) + beta C(i,j),
// with X(r,c) at x[r + c * ld].
std::vector<double> ColumnMajorReference(char ta, char tb, int m, int n, int k,
                                         float alpha,
                                         const std::vector<float>& a, int lda,
                                         const std::vector<float>& b, int ldb,
                                         float beta,
                                         const std::vector<float>& c, int ldc) {
  std::vector<double> out(c.begin(), c.end());
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < m; ++i) {
      double sum = 0;
      for (int p = 0; p < k; ++p) {
        const double av = ta == 'N' ? a[i + p * lda] : a[p + i * lda];
        const double bv = tb == 'N' ? b[p + j * ldb] : b[j + p * ldb];
        sum += av * bv;
      }
      out[i + j * ldc] =
          alpha * sum + (beta == 0 ? 0.0 : beta * double(c[i + j * ldc]));
    }
  }
  return out;
}

std::vector<float> Random(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(0.1f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = (rng() % 2 ? 1 : -1) * dist(rng);
  return v;
}

// Column-major calls mapped to row-major and computed by ComputeLocally
// agree with the reference on every transpose pair, with leading
// dimensions larger than the matrices; C's padding stays untouched.
TEST(BlasLayoutTest, ColumnMajorCallsMapOntoRowMajor) {
  const int m = 7, n = 5, k = 6;
  for (char ta : {'N', 'T', 'c'}) {
    for (char tb : {'n', 'T', 'C'}) {
      for (float beta : {0.0f, 1.3f}) {
        const bool tra = ta != 'N' && ta != 'n';
        const bool trb = tb != 'N' && tb != 'n';
        const int lda = (tra ? k : m) + 2, ldb = (trb ? n : k) + 3, ldc = m + 1;
        const std::vector<float> a = Random(lda * (tra ? m : k), 1);
        const std::vector<float> b = Random(ldb * (trb ? k : n), 2);
        std::vector<float> c = Random(ldc * n, 3);
        if (beta == 0.0f) {
          // Never read: NaN must not leak into the result.
          for (int j = 0; j < n; ++j) {
            for (int i = 0; i < m; ++i) {
              c[i + j * ldc] = std::numeric_limits<float>::quiet_NaN();
            }
          }
        }
        const std::vector<double> want =
            ColumnMajorReference(tra ? 'T' : 'N', trb ? 'T' : 'N', m, n, k,
                                 0.7f, a, lda, b, ldb, beta, c, ldc);
        const StridedGemm g =
            FromColumnMajor(ta, tb, m, n, k, 0.7f, a.data(), lda, b.data(), ldb,
                            beta, c.data(), ldc);
        ASSERT_TRUE(Valid(g));
        EXPECT_EQ(g.m, n);  // C^T: rows of the row-major view
        EXPECT_EQ(g.n, m);
        ComputeLocally(g);
        for (int j = 0; j < n; ++j) {
          for (int i = 0; i < ldc; ++i) {
            const double got = c[i + j * ldc];
            if (i < m) {
              EXPECT_NEAR(got, want[i + j * ldc], 1e-5) << ta << tb << beta;
            } else {
              EXPECT_EQ(got, want[i + j * ldc]) << "padding changed";
            }
          }
        }
      }
    }
  }
}

TEST(BlasLayoutTest, RowMajorStoredShapes) {
  const StridedGemm g = FromRowMajor(true, false, 4, 5, 6, 1, nullptr, 4,
                                     nullptr, 5, 0, nullptr, 5);
  EXPECT_EQ(StoredRowsA(g), 6);
  EXPECT_EQ(StoredColsA(g), 4);
  EXPECT_EQ(StoredRowsB(g), 6);
  EXPECT_EQ(StoredColsB(g), 5);
  EXPECT_TRUE(Valid(g));
}

// BLAS's own rules, for which the next BLAS (its XERBLA) must answer.
TEST(BlasLayoutTest, InvalidArgumentsAreRecognized) {
  auto col = [](char ta, char tb, int m, int n, int k, int lda, int ldb,
                int ldc) {
    return Valid(FromColumnMajor(ta, tb, m, n, k, 1, nullptr, lda, nullptr, ldb,
                                 0, nullptr, ldc));
  };
  EXPECT_TRUE(col('N', 'N', 3, 4, 5, 3, 5, 3));
  EXPECT_FALSE(col('X', 'N', 3, 4, 5, 3, 5, 3));
  EXPECT_FALSE(col('N', '/', 3, 4, 5, 3, 5, 3));
  EXPECT_FALSE(col('N', 'N', -1, 4, 5, 3, 5, 3));
  EXPECT_FALSE(col('N', 'N', 3, -4, 5, 3, 5, 3));
  EXPECT_FALSE(col('N', 'N', 3, 4, -5, 3, 5, 3));
  EXPECT_FALSE(col('N', 'N', 3, 4, 5, 2, 5, 3));  // lda < m
  EXPECT_FALSE(col('T', 'N', 3, 4, 5, 3, 5, 3));  // lda < k
  EXPECT_FALSE(col('N', 'N', 3, 4, 5, 3, 4, 3));  // ldb < k
  EXPECT_FALSE(col('N', 'T', 3, 4, 5, 3, 3, 3));  // ldb < n
  EXPECT_FALSE(col('N', 'N', 3, 4, 5, 3, 5, 2));  // ldc < m
  EXPECT_TRUE(col('N', 'N', 0, 0, 0, 1, 1, 1));   // nothing to do, valid
}

TEST(BlasLayoutTest, PackAndUnpackSkipThePadding) {
  const std::vector<float> src = {1, 2, 9, 3, 4, 9};
  std::vector<float> dense(4);
  PackRows(src.data(), 3, 2, 2, dense.data());
  EXPECT_EQ(dense, (std::vector<float>{1, 2, 3, 4}));
  std::vector<float> back(6, -1);
  UnpackRows(dense.data(), 2, 2, back.data(), 3);
  EXPECT_EQ(back, (std::vector<float>{1, 2, -1, 3, 4, -1}));
}

}  // namespace
}  // namespace gemm::client
