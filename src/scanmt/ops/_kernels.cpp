// Native CPU forward passes of sparsemax, csparsemax and csoftmax (scanmt.ops).
//
// Built on first use by scanmt/ops/_native.py (torch.utils.cpp_extension.load);
// everything here is private to scanmt.ops.  One call solves all rows of a
// [R, J] float32 or float64 tensor (any strides, e.g. broadcast views) with an
// optional bool mask (true = may receive attention).  Per row, in double
// precision whatever the dtype:
//
//   1. validation, always computed: NaN or +inf in z, NaN or negative (below
//      -neg_tol) u at an unmasked position, infeasible bounds (the sum of the
//      bounds over the usable positions below 1 - feas_tol).  The number of
//      such rows is returned; the caller raises (through the PyTorch path, which
//      builds the message) or, with validate=False, keeps the output: NaN in
//      rows with a NaN/+inf score or a NaN bound, p = clamp(u, 0, 1) in
//      infeasible rows.
//   2. the usable entries (unmasked, z > -inf) are gathered, with the bounds
//      read as clamp(u, 0, cap); rows whose bounds sum to at most 1 (tight, or
//      fully masked) get p = u, as in the PyTorch path.
//   3. the exact threshold, with every pass over a row written so that the
//      compiler vectorises it (reductions under `omp simd`, selects instead of
//      branches):
//      * sparsemax: on z - max(z) (exact near the maximum, where the support
//        lies, however large z is), Newton's method from the left on the convex
//        f(tau) = sum max(z - tau, 0) - 1 (Michelot's algorithm); a step that
//        stays on the linear piece it started from is the root and ends it.
//      * csparsemax: f(tau) = sum clip(z - tau, 0, c) - 1, c = min(u, 2), is
//        non-increasing and piecewise linear with breakpoints z and z - c.  A
//        bracket search (Illinois regula falsi, with bisection if it stalls)
//        where every pass also returns the slope of f and the breakpoints
//        around the point, so that a Newton step that stays on that piece is
//        the exact root and ends the search.  Rows with scores beyond
//        kRecentreAt are solved again in frames centred at tau
//        (csparsemax_recentre), where the entries near it are exact.
//      * csoftmax: the greedy capping of Martins and Kreutzer on
//        exp(z - max z) (an exp accurate to 1 ulp that vectorises), recentred
//        where the free mass underflows.
//      Rows not done within kMaxSteps passes (kMaxRounds rounds) are finished
//      by sorting.  All paths are exact up to rounding.
//   4. p, and what the closed-form backward passes need (x = z - tau for
//      csparsemax, the 0/1 capped mask for csoftmax), rounded to the dtype.
//
// Scratch buffers are 64-byte aligned, so that vectorised reductions add in the
// same order on every call: results do not depend on memory layout or on the
// other rows.

#ifndef SCANMT_KERNELS_CORE_ONLY  // (defined by standalone C++ tests of the core)
#include <torch/csrc/utils/pybind.h>
#include <pybind11/stl.h>

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#endif

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <tuple>
#include <vector>

#if defined(__GNUC__) || defined(__clang__)
#define SCANMT_INLINE inline __attribute__((always_inline))
#define SCANMT_INLINE_LAMBDA __attribute__((always_inline))
#else
#define SCANMT_INLINE inline
#define SCANMT_INLINE_LAMBDA
#endif

// On x86-64 Linux with GCC the row loops are compiled for several ISAs, picked
// at load time by the CPU: the baseline and x86-64-v3 (AVX2, FMA) and, for rows
// of at least kWideJ entries, also x86-64-v4 (AVX-512; slower on short rows).
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11 && defined(__x86_64__) && defined(__linux__)
#define SCANMT_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#define SCANMT_CLONES_WIDE __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#define SCANMT_HAS_WIDE 1
#else
#define SCANMT_CLONES
#define SCANMT_CLONES_WIDE
#define SCANMT_HAS_WIDE 0
#endif

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr int kMaxSteps = 100;    // sparsemax, csparsemax: passes before the sort
constexpr int kMaxRounds = 16;    // csoftmax: capping rounds before the sort
constexpr double kRecentre = 1e-250;  // csoftmax: a free mass below this is recomputed
constexpr int64_t kWideJ = 32;        // rows at least this long use the AVX-512 clones
constexpr double kRecentreAt = 1024.0;  // csparsemax: rows with scores beyond this are re-solved near tau
constexpr double kEps = std::numeric_limits<double>::epsilon();

// exp(x) for x <= 0, to 1 ulp; 0 for x below -708 (where exp(x) < 3.3e-308:
// no subnormals).  Cody-Waite reduction x = k ln2 + r, |r| <= ln2 / 2, and the
// Taylor polynomial of degree 13 (error < 1e-17); no branches, so loops over it
// vectorise.
SCANMT_INLINE double exp_le0(double x_in) {
  const double x = x_in > -708.0 ? x_in : -708.0;
  constexpr double kShift = 6755399441055744.0;  // 1.5 * 2^52: round to integer in the low bits
  const double t = x * 1.4426950408889634 + kShift;
  const double k = t - kShift;
  const double r = (x - k * 6.93147180369123816490e-01) - k * 1.90821492927058770002e-10;
  double p = 1.0 / 6227020800.0;
  p = p * r + 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  // 2^k from the bits of t (k >= -1021: a normal number)
  const int64_t ki = __builtin_bit_cast(int64_t, t) - __builtin_bit_cast(int64_t, kShift);
  const double v = p * __builtin_bit_cast(double, static_cast<int64_t>(static_cast<uint64_t>(ki + 1023) << 52));
  return x_in > -708.0 ? v : 0.0;
}

// Per-thread scratch space for one row at a time.
struct Work {
  std::vector<double> store;
  std::vector<int64_t> idx, order;
  double *z, *c, *zc, *e, *fr, *bp;  // bp holds 2 * n
  int64_t m = 0;       // number of usable entries, gathered into z and c
  bool dense = false;  // every entry usable: entry k is position k (else idx[k])
  double usum = 0.0;   // sum of the clamped bounds over the usable entries (see summarise)
  double zmax = 0.0, zc_min = 0.0;  // max z and min (z - c) over the usable entries
  bool have_extremes = false;       // (set by gather's fast path)
  int max_steps = kMaxSteps, max_rounds = kMaxRounds;  // (lowered by tests of the sort fallbacks)

  explicit Work(int64_t J) : idx(J), order(J) {
    const int64_t n = (J + 7) / 8 * 8;  // 64-byte multiples
    store.resize(7 * n + 8);
    double* b = store.data();
    b += ((64 - reinterpret_cast<uintptr_t>(b) % 64) % 64) / sizeof(double);
    z = b;
    c = b + n;
    zc = b + 2 * n;
    e = b + 3 * n;
    fr = b + 4 * n;
    bp = b + 5 * n;
  }
};

SCANMT_INLINE double vsum(const double* a, int64_t m) {
  double s = 0.0;
#pragma omp simd reduction(+ : s)
  for (int64_t k = 0; k < m; ++k) s += a[k];
  return s;
}

SCANMT_INLINE double vmax(const double* a, int64_t m) {
  double v = -kInf;
#pragma omp simd reduction(max : v)
  for (int64_t k = 0; k < m; ++k) v = v > a[k] ? v : a[k];
  return v;
}

// Gathers the usable entries of a row into w and checks it.  Returns true if the
// row is bad (a NaN/+inf score or a NaN bound at an unmasked position: not
// solved) and sets `invalid` for any validation failure (bad rows, negative
// bounds, infeasible bounds).  `u` is null for sparsemax.
template <typename T>
SCANMT_INLINE bool gather_impl(Work& w, const T* z, int64_t zs, const T* u, int64_t us, const bool* mk, int64_t ms,
                               int64_t J, double cap, T negt, bool& invalid) {
  double* zd = w.z;
  double* cd = w.c;
  double* zc = w.zc;
  // the common case in one vectorisable pass: every entry unmasked, with a finite
  // score and a valid bound; it also finds max z, the lower breakpoints z - c
  // and their min (see summarise)
  double n_other = 0.0;
  if (u) {
    double hi = -kInf, lo = kInf;
#pragma omp simd reduction(+ : n_other) reduction(max : hi) reduction(min : lo)
    for (int64_t j = 0; j < J; ++j) {
      const double zj = static_cast<double>(z[j * zs]);
      const T ut = u[j * us];
      const double uj = static_cast<double>(ut);
      const bool ok = (!mk || mk[j * ms]) && zj < kInf && zj > -kInf && ut >= negt;
      n_other += ok ? 0.0 : 1.0;
      const double cj = uj > 0.0 ? (uj < cap ? uj : cap) : 0.0;
      const double b = zj - cj;
      zd[j] = zj;
      cd[j] = cj;
      zc[j] = b;
      hi = hi > zj ? hi : zj;
      lo = lo < b ? lo : b;
    }
    w.zmax = hi;
    w.zc_min = lo;
  } else {
    double hi = -kInf;
#pragma omp simd reduction(+ : n_other) reduction(max : hi)
    for (int64_t j = 0; j < J; ++j) {
      const double zj = static_cast<double>(z[j * zs]);
      const bool ok = (!mk || mk[j * ms]) && zj < kInf && zj > -kInf;
      n_other += ok ? 0.0 : 1.0;
      zd[j] = zj;
      hi = hi > zj ? hi : zj;
    }
    w.zmax = hi;
  }
  bool bad = false, neg = false;
  int64_t m = J;
  if (n_other != 0.0) {  // masked or -inf entries, or something to report
    m = 0;
    for (int64_t j = 0; j < J; ++j) {
      if (mk && !mk[j * ms]) continue;
      const double zj = static_cast<double>(z[j * zs]);
      if (!(zj < kInf)) {  // NaN or +inf
        bad = true;
        continue;
      }
      double cj = 0.0;
      if (u) {
        const T ut = u[j * us];
        if (std::isnan(ut)) {
          bad = true;
          continue;
        }
        if (ut < negt) neg = true;
        const double uj = static_cast<double>(ut);
        cj = uj > 0.0 ? (uj < cap ? uj : cap) : 0.0;
      }
      if (zj == -kInf) continue;
      zd[m] = zj;
      cd[m] = cj;
      w.idx[m] = j;
      ++m;
    }
  }
  w.m = m;
  w.dense = m == J;
  w.have_extremes = n_other == 0.0;
  invalid = bad || neg;  // (and infeasible bounds: see summarise)
  return bad;
}

// The sum of the bounds, max z, the lower breakpoints z - c and their min over
// the gathered entries (a row with u).  Adds infeasible bounds to `invalid`.
SCANMT_INLINE void summarise(Work& w, double feasible, bool& invalid) {
  const int64_t m = w.m;
  const double* z = w.z;
  const double* c = w.c;
  double* zc = w.zc;
  if (!w.have_extremes) {  // (else gather found them)
    double hi = -kInf, lo = kInf;
#pragma omp simd reduction(max : hi) reduction(min : lo)
    for (int64_t k = 0; k < m; ++k) {
      const double b = z[k] - c[k];
      zc[k] = b;
      hi = hi > z[k] ? hi : z[k];
      lo = lo < b ? lo : b;
    }
    w.zmax = hi;
    w.zc_min = lo;
  }
  // (a separate pass over aligned memory: the same order of summation for a row
  // wherever it lies)
  w.usum = vsum(c, m);
  invalid = invalid || (m > 0 && !(w.usum >= feasible));
}

template <typename T>
SCANMT_INLINE bool gather(Work& w, const T* z, int64_t zs, const T* u, int64_t us, const bool* mk, int64_t ms,
                          int64_t J, double cap, T negt, bool& invalid) {
  if (zs == 1 && (!u || us == 1) && (!mk || ms == 1))  // unit strides, known to the compiler
    return gather_impl<T>(w, z, 1, u, 1, mk, 1, J, cap, negt, invalid);
  return gather_impl<T>(w, z, zs, u, us, mk, ms, J, cap, negt, invalid);
}

// ---------------------------------------------------------------------------
// sparsemax
// ---------------------------------------------------------------------------

// tau by sorting: max_k (sum of the k largest - 1) / k.
double sparsemax_tau_sort(Work& w) {
  double* s = w.bp;
  std::copy(w.z, w.z + w.m, s);
  std::sort(s, s + w.m, std::greater<double>());
  double cs = 0.0, tau = -kInf;
  for (int64_t k = 0; k < w.m; ++k) {
    cs += s[k];
    tau = std::max(tau, (cs - 1.0) / static_cast<double>(k + 1));
  }
  return tau;
}

// Subtracts max(z) from the gathered scores: near the maximum, where the support of
// sparsemax lies, z - max(z) is exact however large z is (zmax - 1/3 is not, at 1e18).
SCANMT_INLINE void shift_to_max(Work& w) {
  double* z = w.z;
  const double zm = w.have_extremes ? w.zmax : vmax(z, w.m);
#pragma omp simd
  for (int64_t k = 0; k < w.m; ++k) z[k] -= zm;
  w.zmax = 0.0;
  w.have_extremes = true;
}

// tau for the gathered entries (m > 0, shifted by shift_to_max): Newton's method from the left.
SCANMT_INLINE double sparsemax_tau(Work& w) {
  const double* z = w.z;
  const int64_t m = w.m;
  // f >= 0 at max(z) - 1 = -1: the max alone has mass 1
  double tau = -1.0;
  for (int step = 0; step < w.max_steps; ++step) {
    double s = 0.0, n = 0.0, above = kInf;
#pragma omp simd reduction(+ : s, n) reduction(min : above)
    for (int64_t k = 0; k < m; ++k) {  // (selects written out: GCC vectorises this form)
      const double x = z[k] - tau;
      const double xp = x > 0.0 ? x : 0.0;
      const double one = x > 0.0 ? 1.0 : 0.0;
      const double za = x > 0.0 ? z[k] : kInf;
      s += xp;
      n += one;
      above = above < za ? above : za;
    }
    // n >= 1 (the max stays in the support); f is linear on [tau, above]
    const double tn = tau + (s - 1.0) / n;
    if (tn <= above) return tn;
    if (!(tn > tau)) return tau;  // no progress: tau is the root to rounding
    tau = tn;
  }
  return sparsemax_tau_sort(w);
}

// The arguments of a row loop: [R, J] inputs with strides, contiguous outputs.
template <typename T>
struct Args {
  int64_t J = 0;
  const T* z = nullptr;
  int64_t z0 = 0, z1 = 0;
  const T* u = nullptr;  // null for sparsemax
  int64_t u0 = 0, u1 = 0;
  const bool* mask = nullptr;  // null: no mask
  int64_t m0 = 0, m1 = 0;
  T* p = nullptr;
  T* aux = nullptr;  // csparsemax: z - tau; csoftmax: capped (0/1)
  T negt = T(0);          // -neg_tol
  double feasible = 0.0;  // 1 - feas_tol, rounded to T
  int max_iter = -1;      // >= 0: lowers the iteration limits (tests of the sort fallbacks)
};

template <typename T>
SCANMT_INLINE void limit(Work& w, const Args<T>& a) {
  if (a.max_iter >= 0) w.max_steps = w.max_rounds = a.max_iter;
}

// The loop over rows [b, e) that the three ops share: gathers row i into one Work
// buffer (with the bounds read as min(u, cap) where the op is bounded, and then
// summarised), counts it if invalid, gives a row with a NaN or +inf score
// p = NaN (and aux = aux_bad), and hands any other to solve(w, i, p), with p
// the row of the output; returns the number of invalid rows.
template <typename T, bool kBounded, typename Solve>
SCANMT_INLINE int64_t for_each_row(const Args<T>& a, int64_t b, int64_t e, double cap, T aux_bad, Solve&& solve) {
  const int64_t J = a.J;
  Work w(J);
  limit(w, a);
  int64_t n_invalid = 0;
  for (int64_t i = b; i < e; ++i) {
    bool invalid = false;
    const T* ur = kBounded ? a.u + i * a.u0 : nullptr;
    const bool bad = gather<T>(w, a.z + i * a.z0, a.z1, ur, kBounded ? a.u1 : 0,
                               a.mask ? a.mask + i * a.m0 : nullptr, a.m1, J, cap, kBounded ? a.negt : T(0), invalid);
    if (kBounded && !bad) summarise(w, a.feasible, invalid);
    n_invalid += invalid;
    T* p = a.p + i * J;
    if (bad) {
      std::fill(p, p + J, static_cast<T>(kNaN));
      if (kBounded) std::fill(a.aux + i * J, a.aux + (i + 1) * J, aux_bad);
      continue;
    }
    solve(w, i, p);
  }
  return n_invalid;
}

// Rows [b, e) of sparsemax; returns the number of invalid rows.
template <typename T>
SCANMT_INLINE int64_t sparsemax_body(const Args<T>& a, int64_t b, int64_t e) {
  const int64_t J = a.J;
  return for_each_row<T, false>(a, b, e, 1.0, T(0), [&](Work& w, int64_t, T* p) SCANMT_INLINE_LAMBDA {
    if (w.m == 0) {
      std::fill(p, p + J, T(0));
      return;
    }
    shift_to_max(w);
    const double tau = sparsemax_tau(w);
    const double* z = w.z;
    if (w.dense) {
#pragma omp simd
      for (int64_t k = 0; k < J; ++k) {
        const double x = z[k] - tau;
        p[k] = static_cast<T>(x > 0.0 ? x : 0.0);
      }
    } else {
      std::fill(p, p + J, T(0));
      for (int64_t k = 0; k < w.m; ++k) {
        const double x = z[k] - tau;
        p[w.idx[k]] = static_cast<T>(x > 0.0 ? x : 0.0);
      }
    }
  });
}

// ---------------------------------------------------------------------------
// csparsemax
// ---------------------------------------------------------------------------

// f(tau) and the number of free entries just right of tau (#{z > tau} - #{z - c > tau}).
SCANMT_INLINE double csp_f(const Work& w, double tau, double& n_free) {
  const double* z = w.z;
  const double* c = w.c;
  const double* zc = w.zc;
  double f = 0.0, n = 0.0;
#pragma omp simd reduction(+ : f, n)
  for (int64_t k = 0; k < w.m; ++k) {
    const double x = z[k] - tau;
    const double xp = x > 0.0 ? x : 0.0;
    f += xp < c[k] ? xp : c[k];
    n += (z[k] > tau ? 1.0 : 0.0) - (zc[k] > tau ? 1.0 : 0.0);
  }
  n_free = n;
  return f - 1.0;
}

// The root by sorting the breakpoints: a binary search for the piece where f
// changes sign (f evaluated exactly at each probe), then its linear root.
double csparsemax_tau_sort(Work& w) {
  const int64_t m = w.m;
  double* bp = w.bp;
  std::copy(w.z, w.z + m, bp);
  std::copy(w.zc, w.zc + m, bp + m);
  std::sort(bp, bp + 2 * m);
  // f(min breakpoint) = sum c - 1 > 0 and f(max breakpoint) = f(max z) = -1
  int64_t a = 0, b = 2 * m - 1;
  double n;
  while (b - a > 1) {
    const int64_t mid = a + (b - a) / 2;
    if (csp_f(w, bp[mid], n) >= 0.0)
      a = mid;
    else
      b = mid;
  }
  const double fa = csp_f(w, bp[a], n);
  if (!(n > 0.0)) return bp[a];
  return std::min(std::max(bp[a] + fa / n, bp[a]), bp[b]);
}

// tau for a row with sum(c) > 1 (see the file comment).  The bracket [lo, hi]
// keeps f(lo) >= 0 >= f(hi); the next point is the Illinois variant of
// regula falsi on it (the endpoint kept twice in a row has its f halved),
// which needs about 2-4 passes on decoder-like bounds and 4-9 where most of the
// support is capped (f is then close to a staircase, on which Newton steps
// mostly leave the bracket), or the midpoint if the bracket did not halve in
// 4 steps.  Every pass also finds the piece of f around the point; a Newton
// step that stays on it is the exact root.
SCANMT_INLINE double csparsemax_tau(Work& w) {
  const int64_t m = w.m;
  const double* z = w.z;
  const double* c = w.c;
  const double* zc = w.zc;
  double lo = w.zc_min, hi = w.zmax;
  double f_lo = w.usum - 1.0, f_hi = -1.0;  // f at the smallest and the largest breakpoint
  // start at the smaller of the sparsemax lower bound max(z) - 1 (close to the
  // root where few bounds bind) and the secant point of the bracket (closer
  // where most do)
  double tau = std::max(lo, std::min(hi - 1.0, lo + f_lo * (hi - lo) / (f_lo - f_hi)));
  int side = 0;                             // which end moved last: 1 = lo, -1 = hi
  double width = hi - lo;
  for (int step = 1; step <= w.max_steps; ++step) {
    double f = 0.0, above = kInf, below = -kInf;
    int64_t n_int = 0;
#pragma omp simd reduction(+ : f, n_int) reduction(min : above) reduction(max : below)
    for (int64_t k = 0; k < m; ++k) {  // (selects written out: GCC vectorises this form)
      const double a = z[k], b = zc[k], ck = c[k];
      const double x = a - tau;
      const double xp = x > 0.0 ? x : 0.0;
      f += xp < ck ? xp : ck;
      n_int += static_cast<int64_t>(a > tau) - static_cast<int64_t>(b > tau);
      const double aa = a > tau ? a : kInf, ba = b > tau ? b : kInf;
      const double ab = a > tau ? -kInf : a, bb = b > tau ? -kInf : b;
      const double up = aa < ba ? aa : ba, dn = ab > bb ? ab : bb;
      above = above < up ? above : up;
      below = below > dn ? below : dn;
    }
    f -= 1.0;
    const double n = static_cast<double>(n_int);
    if (f == 0.0) return tau;
    // f is linear with slope -n on [below, above], the piece that holds tau
    const double tn = n > 0.0 ? tau + f / n : kNaN;
    if (tn >= below && tn <= above) return tn;
    if (f > 0.0) {  // the root is right of tau, and right of the piece if the piece's root is
      if (tau > lo) {
        lo = tau;
        f_lo = f;
      }
      if (!(tn <= above) && above > lo) {
        lo = above;
        f_lo = f - n * (above - tau);
      }
      if (side == 1) f_hi *= 0.5;
      side = 1;
    } else {
      if (tau < hi) {
        hi = tau;
        f_hi = f;
      }
      if (!(tn >= below) && below < hi) {
        hi = below;
        f_hi = f + n * (tau - below);
      }
      if (side == -1) f_lo *= 0.5;
      side = -1;
    }
    if (!(lo < hi)) return 0.5 * (lo + hi);  // collapsed: the root is there, to rounding
    double next = lo + f_lo * (hi - lo) / (f_lo - f_hi);
    if (step % 4 == 0) {  // safeguard: bisect if the bracket did not halve in 4 steps
      if (hi - lo > 0.5 * width) next = 0.5 * (lo + hi);
      width = hi - lo;
    }
    if (!(next > lo && next < hi)) next = 0.5 * (lo + hi);
    if (next == tau) return tau;
    tau = next;
  }
  return csparsemax_tau_sort(w);
}

// The frame of a row for csparsemax_recentre: the scores z0 minus r_hi + r_lo, clamped to
// [-B, B], with the breakpoints x - c and the extremes.
SCANMT_INLINE void csp_frame(Work& w, const double* z0, double r_hi, double r_lo, double B) {
  double* x = w.z;
  const double* c = w.c;
  double* zc = w.zc;
  double hi = -kInf, lo = kInf;
#pragma omp simd reduction(max : hi) reduction(min : lo)
  for (int64_t k = 0; k < w.m; ++k) {
    double v = (z0[k] - r_hi) - r_lo;
    v = v < B ? v : B;
    v = v > -B ? v : -B;
    const double b = v - c[k];
    x[k] = v;
    zc[k] = b;
    hi = hi > v ? hi : v;
    lo = lo < b ? lo : b;
  }
  w.zmax = hi;
  w.zc_min = lo;
  w.have_extremes = true;
}

// tau of a row with scores beyond kRecentreAt, given tau found in the scores' own frame,
// where it is only as precise as their largest magnitude (at 1e18, tau = max z - 1/3 is
// not a double; at z = [1e30, 0.3, 0], 0.3 and 0 are lost next to 1e30).  Solved again in
// frames centred at tau, as in scanmt.ops._checks.recentre: r = r_hi + r_lo (unevaluated,
// so that x = (z - r_hi) - r_lo is exact near tau), x clamped to [-B, B] with B the error
// bound of r plus a margin (an entry beyond B stays capped above, zero below); each
// solve errs by at most 4 m eps B, which bounds the next B.  The final frame is left in
// w.z (the scores in w.e) and tau in it is returned.
SCANMT_INLINE double csparsemax_recentre(Work& w, double tau) {
  const double big = std::max(std::max(std::fabs(w.zmax), std::fabs(w.zc_min)), std::fabs(tau));
  const double shrink = 4.0 * static_cast<double>(w.m) * kEps, margin = 4.0;
  double B = big * shrink + margin, r_hi = tau, r_lo = 0.0, t = 0.0;
  std::swap(w.z, w.e);  // keep the scores; w.z receives the frame
  for (int round = 0; round < 16; ++round) {
    csp_frame(w, w.e, r_hi, r_lo, B);
    t = csparsemax_tau(w);
    if (B <= kRecentreAt) break;
    // r_hi + r_lo + t as r_hi + r_lo again, without rounding (Knuth's two-sum)
    const double b = r_lo + t, sum = r_hi + b, bb = sum - r_hi;
    r_lo = (r_hi - (sum - bb)) + (b - bb);
    r_hi = sum;
    B = B * shrink + margin;
  }
  return t;
}

// Rows [b, e) of csparsemax; returns the number of invalid rows.
template <typename T>
SCANMT_INLINE int64_t csparsemax_body(const Args<T>& a, int64_t b, int64_t e) {
  const int64_t J = a.J;
  const T big = std::numeric_limits<T>::max(), ninf = -std::numeric_limits<T>::infinity();
  // bounds read as min(u, 2): above 1 they never bind, and unlike min(u, 1)
  // the cap keeps tau unique when one entry takes all the mass
  return for_each_row<T, true>(a, b, e, 2.0, static_cast<T>(kNaN), [&](Work& w, int64_t i, T* p) SCANMT_INLINE_LAMBDA {
    T* x = a.aux + i * J;
    if (!w.dense) {
      std::fill(p, p + J, T(0));
      std::fill(x, x + J, ninf);  // unusable: never free, never capped
    }
    const double* c = w.c;
    if (!(w.usum > 1.0)) {  // p = u (tight or fully masked): every usable entry capped
      for (int64_t k = 0; k < w.m; ++k) {
        const int64_t j = w.dense ? k : w.idx[k];
        p[j] = static_cast<T>(c[k]);
        x[j] = big;
      }
      return;
    }
    double tau = csparsemax_tau(w);
    if (std::fabs(w.zmax) > kRecentreAt || std::fabs(w.zc_min) > kRecentreAt) tau = csparsemax_recentre(w, tau);
    const double* z = w.z;
    if (w.dense) {
#pragma omp simd
      for (int64_t k = 0; k < J; ++k) {
        const double v = z[k] - tau;
        const double vp = v > 0.0 ? v : 0.0;
        p[k] = static_cast<T>(vp < c[k] ? vp : c[k]);
        x[k] = static_cast<T>(v);
      }
    } else {
      for (int64_t k = 0; k < w.m; ++k) {
        const double v = z[k] - tau;
        const double vp = v > 0.0 ? v : 0.0;
        p[w.idx[k]] = static_cast<T>(vp < c[k] ? vp : c[k]);
        x[w.idx[k]] = static_cast<T>(v);
      }
    }
  });
}

// ---------------------------------------------------------------------------
// csoftmax
// ---------------------------------------------------------------------------

// Recomputes e = exp(z - max of the free z) on the free entries; returns their
// sum (0 if none is free).
SCANMT_INLINE double csoftmax_recentre(Work& w) {
  const int64_t m = w.m;
  const double* z = w.z;
  const double* fr = w.fr;
  double* e = w.e;
  double mf = -kInf;
#pragma omp simd reduction(max : mf)
  for (int64_t k = 0; k < m; ++k) {
    const double v = fr[k] > 0.0 ? z[k] : -kInf;
    mf = mf > v ? mf : v;
  }
  if (mf == -kInf) return 0.0;
  double s = 0.0;
#pragma omp simd reduction(+ : s)
  for (int64_t k = 0; k < m; ++k) {
    const double d = z[k] - mf;
    const double ek = fr[k] > 0.0 ? exp_le0(d < 0.0 ? d : 0.0) : e[k];
    e[k] = ek;
    s += fr[k] * ek;
  }
  return s;
}

SCANMT_INLINE double free_mass(const Work& w) {
  const double* e = w.e;
  const double* fr = w.fr;
  double s = 0.0;
#pragma omp simd reduction(+ : s)
  for (int64_t k = 0; k < w.m; ++k) s += fr[k] * e[k];
  return s;
}

// Finish by sorting the free entries by key z - log c (decreasing): the ones
// capped at the solution are a prefix, those that violate their bound when all
// before them are capped.  In log space (log-sum-exp of the suffixes), so that
// entries far below the others (|z| ~ 1e4) are decided right.
void csoftmax_sort_finish(Work& w, double capsum) {
  const int64_t m = w.m;
  const double* z = w.z;
  const double* c = w.c;
  double* fr = w.fr;
  int64_t nf = 0;
  int64_t* ord = w.order.data();
  for (int64_t k = 0; k < m; ++k)
    if (fr[k] > 0.0) ord[nf++] = k;
  double* key = w.bp;
  for (int64_t i = 0; i < nf; ++i) key[ord[i]] = z[ord[i]] - std::log(c[ord[i]]);
  std::sort(ord, ord + nf, [key](int64_t a, int64_t b) { return key[a] > key[b]; });
  double* lse = w.bp + m;  // lse[i] = log of the sum of exp(z) over ord[i:]
  double acc = -kInf;
  for (int64_t i = nf - 1; i >= 0; --i) {
    const double v = z[ord[i]];
    const double hi = std::max(acc, v), lo = std::min(acc, v);
    acc = hi + std::log1p(std::exp(lo - hi));
    lse[i] = acc;
  }
  double budget = 1.0 - capsum;
  for (int64_t i = 0; i < nf; ++i) {
    const int64_t k = ord[i];
    // entry k takes exp(z_k - lse_i) of the budget if all before it are capped
    if (!(budget > 0.0) || !(z[k] - lse[i] + std::log(budget) > std::log(c[k]))) break;
    fr[k] = 0.0;
    budget -= c[k];
  }
}

// Writes the final p of the gathered entries into w.e (a row with sum(c) > 1).
SCANMT_INLINE void csoftmax_solve(Work& w) {
  const int64_t m = w.m;
  const double* z = w.z;
  const double* c = w.c;
  double* e = w.e;
  double* fr = w.fr;  // 1 for free entries, 0 for capped ones
  const double zmax = w.zmax;
  double s = 0.0;
#pragma omp simd reduction(+ : s)
  for (int64_t k = 0; k < m; ++k) {
    const double ek = exp_le0(z[k] - zmax);
    const double f = c[k] > 0.0 ? 1.0 : 0.0;  // u = 0: capped from the start
    e[k] = ek;
    fr[k] = f;
    s += f * ek;
  }
  double capsum = 0.0, s_exact = s;
  bool settled = false;
  for (int round = 0; round < w.max_rounds; ++round) {
    if (!(s >= kRecentre)) {  // the free mass lies far below the max (or nothing is free)
      s = s_exact = csoftmax_recentre(w);
      if (!(s > 0.0)) {
        settled = true;
        break;
      }
    }
    const double budget = 1.0 - capsum;
    if (!(budget > 0.0)) {  // used up, which happens only by rounding
      settled = true;
      break;
    }
    const double ratio = budget / s;
    // entry k violates its bound iff e * budget / s > c; capping all violators at
    // once is exact (they are all capped at the solution)
    double ds = 0.0, dc = 0.0, nv = 0.0;
#pragma omp simd reduction(+ : ds, dc, nv)
    for (int64_t k = 0; k < m; ++k) {
      const double v = e[k] * ratio > c[k] ? fr[k] : 0.0;
      fr[k] -= v;
      ds += v * e[k];
      dc += v * c[k];
      nv += v;
    }
    if (nv == 0.0) {
      settled = true;
      break;
    }
    capsum += dc;
    // s - ds carries the rounding error of the last exact sum, s_exact * 1e-16:
    // recomputed once that could exceed 1e-14 of it
    s -= ds;
    if (!(s >= 0.01 * s_exact)) s = s_exact = free_mass(w);
  }
  if (!settled) csoftmax_sort_finish(w, capsum);
  // the final sums, exactly
  s = 0.0;
  capsum = 0.0;
#pragma omp simd reduction(+ : s, capsum)
  for (int64_t k = 0; k < m; ++k) {
    s += fr[k] * e[k];
    capsum += (1.0 - fr[k]) * c[k];
  }
  if (!(s >= kRecentre)) s = csoftmax_recentre(w);
  const double budget = 1.0 - capsum;
  // (ratio = 0: the capped entries use up the budget, only by rounding; the free ones get 0)
  const double ratio = budget > 0.0 && s > 0.0 ? budget / s : 0.0;
#pragma omp simd
  for (int64_t k = 0; k < m; ++k) {
    const double q = e[k] * ratio;
    e[k] = fr[k] > 0.0 ? (q < c[k] ? q : c[k]) : c[k];
  }
}

// Rows [b, e) of csoftmax; returns the number of invalid rows.
template <typename T>
SCANMT_INLINE int64_t csoftmax_body(const Args<T>& a, int64_t b, int64_t e) {
  const int64_t J = a.J;
  return for_each_row<T, true>(a, b, e, 1.0, T(0), [&](Work& w, int64_t i, T* p) SCANMT_INLINE_LAMBDA {
    const T* ur = a.u + i * a.u0;
    T* cp = a.aux + i * J;
    if (!w.dense) {
      std::fill(p, p + J, T(0));
      std::fill(cp, cp + J, T(0));  // unusable: not capped
    }
    if (w.usum > 1.0)
      csoftmax_solve(w);
    else  // p = u (tight or fully masked)
      std::copy(w.c, w.c + w.m, w.e);
    // capped for the backward pass: the caller's bound binds (u = 0 included)
    const int64_t u1 = a.u1;
    if (w.dense) {
      const double* q = w.e;
#pragma omp simd
      for (int64_t k = 0; k < J; ++k) {
        const T pj = static_cast<T>(q[k]);
        p[k] = pj;
        cp[k] = ur[k * u1] > pj ? T(0) : T(1);
      }
    } else {
      for (int64_t k = 0; k < w.m; ++k) {
        const int64_t j = w.idx[k];
        const T pj = static_cast<T>(w.e[k]);
        p[j] = pj;
        cp[j] = ur[j * u1] > pj ? T(0) : T(1);
      }
    }
  });
}

// The row loops, as compiled functions (see SCANMT_CLONES).
#define SCANMT_ROWS(op)                                                          \
  template <typename T>                                                          \
  SCANMT_CLONES int64_t op##_rows(const Args<T>& a, int64_t b, int64_t e) {      \
    return op##_body<T>(a, b, e);                                                \
  }                                                                              \
  template <typename T>                                                          \
  SCANMT_CLONES_WIDE int64_t op##_rows_wide(const Args<T>& a, int64_t b, int64_t e) { \
    return op##_body<T>(a, b, e);                                                \
  }
SCANMT_ROWS(sparsemax)
SCANMT_ROWS(csparsemax)
SCANMT_ROWS(csoftmax)
#undef SCANMT_ROWS

}  // namespace

// ---------------------------------------------------------------------------
// entry points: argument checks, dtype dispatch, the loop over rows
// ---------------------------------------------------------------------------

#ifndef SCANMT_KERNELS_CORE_ONLY
namespace {

void check(const at::Tensor& t, const char* name, const at::Tensor& z) {
  TORCH_CHECK(t.device().is_cpu(), name, " must be a CPU tensor");
  TORCH_CHECK(t.dim() == 2 && t.sizes() == z.sizes(), name, " must be 2-D with the shape of z");
}

template <typename T>
using RowsFn = int64_t (*)(const Args<T>&, int64_t, int64_t);

// Runs the row loop over all rows of the checked inputs, writing into p (and
// aux), in parallel with ATen's intra-op threads for large inputs; returns the
// number of invalid rows.
template <typename T>
int64_t run(RowsFn<T> narrow, RowsFn<T> wide, int64_t grain_work, const at::Tensor& z, const at::Tensor* u,
            const std::optional<at::Tensor>& mask, at::Tensor& p, at::Tensor* aux, double feas_tol, double neg_tol,
            int64_t max_iter) {
  Args<T> a;
  const int64_t R = z.size(0), J = z.size(1);
  const RowsFn<T> fn = SCANMT_HAS_WIDE && J >= kWideJ ? wide : narrow;
  a.J = J;
  a.z = z.data_ptr<T>();
  a.z0 = z.stride(0);
  a.z1 = z.stride(1);
  if (u) {
    a.u = u->data_ptr<T>();
    a.u0 = u->stride(0);
    a.u1 = u->stride(1);
  }
  if (mask) {
    a.mask = mask->data_ptr<bool>();
    a.m0 = mask->stride(0);
    a.m1 = mask->stride(1);
  }
  a.p = p.data_ptr<T>();
  a.aux = aux ? aux->data_ptr<T>() : nullptr;
  a.negt = static_cast<T>(-neg_tol);
  a.feasible = static_cast<double>(static_cast<T>(1.0 - feas_tol));
  a.max_iter = static_cast<int>(std::min<int64_t>(max_iter, 1 << 20));
  std::atomic<int64_t> n_invalid{0};
  at::parallel_for(0, R, std::max<int64_t>(1, grain_work / J),
                   [&](int64_t b, int64_t e) { n_invalid += fn(a, b, e); });
  return n_invalid.load();
}

void check_inputs(const at::Tensor& z, const at::Tensor* u, const std::optional<at::Tensor>& mask) {
  check(z, "z", z);
  TORCH_CHECK(z.size(1) > 0, "z must have a non-empty last dimension");
  TORCH_CHECK(z.scalar_type() == at::kFloat || z.scalar_type() == at::kDouble, "z must be float32 or float64");
  if (u) {
    check(*u, "u", z);
    TORCH_CHECK(u->scalar_type() == z.scalar_type(), "u must have the dtype of z");
  }
  if (mask) {
    check(*mask, "mask", z);
    TORCH_CHECK(mask->scalar_type() == at::kBool, "mask must be bool");
  }
}

#define SCANMT_RUN(op, grain, u, aux)                                                                  \
  (z.scalar_type() == at::kFloat                                                                       \
       ? run<float>(op##_rows<float>, op##_rows_wide<float>, grain, z, u, mask, p, aux, feas_tol, neg_tol, \
                    max_iter)                                                                          \
       : run<double>(op##_rows<double>, op##_rows_wide<double>, grain, z, u, mask, p, aux, feas_tol,      \
                     neg_tol, max_iter))

std::tuple<at::Tensor, int64_t> sparsemax_forward(const at::Tensor& z, const std::optional<at::Tensor>& mask,
                                                  int64_t max_iter) {
  check_inputs(z, nullptr, mask);
  at::Tensor p = at::empty(z.sizes(), z.options());
  const double feas_tol = 0.0, neg_tol = 0.0;
  const int64_t n = SCANMT_RUN(sparsemax, 32768, nullptr, nullptr);
  return {p, n};
}

std::tuple<at::Tensor, at::Tensor, int64_t> csparsemax_forward(const at::Tensor& z, const at::Tensor& u,
                                                               const std::optional<at::Tensor>& mask,
                                                               double feas_tol, double neg_tol, int64_t max_iter) {
  check_inputs(z, &u, mask);
  at::Tensor p = at::empty(z.sizes(), z.options()), x = at::empty(z.sizes(), z.options());
  const int64_t n = SCANMT_RUN(csparsemax, 8192, &u, &x);
  return {p, x, n};
}

std::tuple<at::Tensor, at::Tensor, int64_t> csoftmax_forward(const at::Tensor& z, const at::Tensor& u,
                                                             const std::optional<at::Tensor>& mask, double feas_tol,
                                                             double neg_tol, int64_t max_iter) {
  check_inputs(z, &u, mask);
  at::Tensor p = at::empty(z.sizes(), z.options()), capped = at::empty(z.sizes(), z.options());
  const int64_t n = SCANMT_RUN(csoftmax, 8192, &u, &capped);
  return {p, capped, n};
}

#undef SCANMT_RUN

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "scanmt.ops native CPU forward kernels (private; see scanmt/ops/_native.py)";
  const auto nogil = py::call_guard<py::gil_scoped_release>();
  m.def("sparsemax_forward", &sparsemax_forward, "(z, mask) -> (p, number of invalid rows)", py::arg("z"),
        py::arg("mask"), py::arg("max_iter") = -1, nogil);
  m.def("csparsemax_forward", &csparsemax_forward,
        "(z, u, mask, feas_tol, neg_tol) -> (p, z - tau, number of invalid rows)", py::arg("z"), py::arg("u"),
        py::arg("mask"), py::arg("feas_tol"), py::arg("neg_tol"), py::arg("max_iter") = -1, nogil);
  m.def("csoftmax_forward", &csoftmax_forward,
        "(z, u, mask, feas_tol, neg_tol) -> (p, capped, number of invalid rows)", py::arg("z"), py::arg("u"),
        py::arg("mask"), py::arg("feas_tol"), py::arg("neg_tol"), py::arg("max_iter") = -1, nogil);
}
#endif  // SCANMT_KERNELS_CORE_ONLY
