// The order of the warp chains (chain_smem.patch, chain_pipe.patch; warp_chain.patch of session 41
// by shuffles) against the finisher's, on the CPU: per round v of L lanes, lane
// pair (2i, 2i + 1) holds unit i + v L / 2; lane parity q adds its round's terms from lanes 2i + q
// in i order, lanes past the row's pieces giving +0; the finisher adds unit u's term in u order.
// Random scales (signed zeros, +-3e38, denormals, NaN) and sums; every y bit for bit the same.
// Standalone: g++ -O2 -ffp-contract=off bench/lab/oneshot/chain_order.cpp -o chain_order &&
// ./chain_order
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>
static uint32_t bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}
int main() {
    std::mt19937 g(1);
    int bad = 0, cases = 0;
    for (int trial = 0; trial < 20000; ++trial) {
        const int L = g() % 2 ? 16 : 32, units = 1 + g() % 256, pieces = 2 * units;
        std::vector<float> w(units);
        std::vector<int> s(units);
        for (int u = 0; u < units; ++u) {
            const float choices[] = {std::ldexp(float(int(g() % 2001) - 1000), -(int)(g() % 40)),
                                     -0.0f,
                                     0.0f,
                                     1e-30f,
                                     -3e38f,
                                     3e38f,
                                     1e-45f};
            w[u] = choices[g() % 7];
            const int sc[] = {int(g() % 2001) - 1000, 0, 1 << 30, -(1 << 30)};
            s[u] = sc[g() % 4];
        }
        if (g() % 50 == 0) w[g() % units] = NAN;
        float ref = 0.0f;
        for (int u = 0; u < units; ++u)
            ref = ref + w[u] * float(s[u]);
        const int kV = (pieces + L - 1) / L;
        float y[2] = {0.0f, 0.0f};
        for (int v = 0; v < kV; ++v) {
            std::vector<float> term(L);
            for (int lane = 0; lane < L; ++lane) {
                const int p = lane + v * L;
                term[lane] = p < pieces ? w[p / 2] * float(s[p / 2]) : 0.0f;
            }
            for (int q = 0; q < 2; ++q)
                for (int i = 0; i < L / 2; ++i)
                    y[q] = y[q] + term[2 * i + q];
        }
        for (int q = 0; q < 2; ++q) {
            ++cases;
            const bool same = bits(y[q]) == bits(ref) || (std::isnan(y[q]) && std::isnan(ref));
            if (!same) ++bad;
        }
    }
    std::printf("%d cases, %d differ\n", cases, bad);
    return bad == 0 ? 0 : 1;
}
