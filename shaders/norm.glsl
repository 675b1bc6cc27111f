// RMSNorm's sum of squares in one fixed order, so that every kernel that normalises a row gets
// the same bits whatever its workgroup (rmsnorm.comp for hk_rmsnorm and hk_rmsnorm_q8_1, the int8
// matvec on f32 x, matvec.comp HK_XF32): the row in blocks of 32 values, each block's squares
// summed in index order (P_b), the blocks in groups of 32, each group's P_b summed in order (G_g),
// then the G_g in order. Every product and sum is its own f32 operation (precise). Include after
// the declaration of the buffer `x` the row is read from, or define HK_NORM_X(i) (the value at
// index i) to read it from elsewhere (rope.comp: a head staged in shared memory).
// HK_NORM_STAGED (a whole workgroup per row: rmsnorm.comp, the int8 matvec's norm tail): define
// HK_NORM_SRC(i), the row's value at index i, and HK_NORM_SB, the blocks per chunk (a multiple of
// 32, so that chunks hold whole groups: a specialization constant the host fits to the device's
// shared memory), before including; hk_norm_sumsq_staged then walks the row in chunks staged in
// shared memory by consecutive invocations (each load instruction a run of whole lines, where a
// block per invocation would touch a line per lane), and leaves the last chunk there
// (hk_norm_staged). HK_NORM_GROUPS (default 1024) may bound the row's groups of 32 blocks.
// Shared memory: 4 * (33 * HK_NORM_SB + HK_NORM_SB + HK_NORM_GROUPS) bytes.
#ifdef HK_NORM_STAGED
#define HK_NORM_STRIDE 33u  // a block's place: the invocations summing consecutive blocks hit distinct banks
shared float hk_norm_xs[HK_NORM_SB * HK_NORM_STRIDE];
shared float hk_norm_p[HK_NORM_SB];
#ifndef HK_NORM_GROUPS
#define HK_NORM_GROUPS 1024u // rows of at most 2^20 values
#endif
shared float hk_norm_g[HK_NORM_GROUPS];
#define HK_NORM_X(i) hk_norm_xs[i]
#endif
#ifndef HK_NORM_X
#define HK_NORM_X(i) x[i]
#endif

// P_b: the squares of x[base .. base + count) (count <= 32) in order. Every load is issued before
// the first add (a loop of fixed count, unrolled by the compilers): a loop of `count` loads into
// the running sum waits one memory round trip per value. A branch, not a select, guards each load:
// a select would read past the row's end in a short last block.
float hk_block_sumsq(uint base, uint count)
{
    float v[32];
    for (uint i = 0; i < 32u; i++) {
        v[i] = 0.0;
        if (i < count)
            v[i] = HK_NORM_X(base + i);
    }
    precise float p = 0.0;
    for (uint i = 0; i < 32u; i++)
        if (i < count) {
            precise float s = v[i] * v[i];
            p = p + s;
        }
    return p;
}

// The RMSNorm scale of a row of n values from its sum of squares
float hk_norm_scale(float ss, uint n, float eps)
{
    precise float mean = ss / float(n);
    precise float m = mean + eps;
    return inversesqrt(m);
}

// A normalised value: x * scale, then * weight
float hk_norm_apply(float x, float scale, float w)
{
    precise float s = x * scale;
    precise float y = s * w;
    return y;
}
vec4 hk_norm_apply4(vec4 x, float scale, vec4 w)
{
    precise vec4 s = x * scale;
    precise vec4 y = s * w;
    return y;
}

#ifdef HK_NORM_STAGED
// Value i of the chunk staged last
float hk_norm_staged(uint i) { return hk_norm_xs[i / 32u * HK_NORM_STRIDE + i % 32u]; }

// Values [first, first + count) of the row into the staging area (count <= 32 * HK_NORM_SB). A
// fixed trip count, so the compilers may issue the loads before the first store.
void hk_norm_stage(uint first, uint count)
{
    for (uint k = 0; k < (32u * HK_NORM_SB + WG - 1u) / WG; k++) {
        uint e = gl_LocalInvocationIndex + k * WG;
        if (e < count)
            hk_norm_xs[e / 32u * HK_NORM_STRIDE + e % 32u] = HK_NORM_SRC(first + e);
    }
}

// The sum of squares of a row of n values in the order above; every invocation of the workgroup
// calls it (barriers) and gets it. The chunk staged last stays: the whole row where n <= 32 *
// HK_NORM_SB.
float hk_norm_sumsq_staged(uint n)
{
    uint nb = (n + 31u) / 32u, lid = gl_LocalInvocationIndex;
    for (uint c = 0; c < nb; c += HK_NORM_SB) {
        hk_norm_stage(32u * c, min(32u * HK_NORM_SB, n - 32u * c));
        barrier();
        for (uint b = lid; b < min(HK_NORM_SB, nb - c); b += WG)
            hk_norm_p[b] = hk_block_sumsq(b * HK_NORM_STRIDE, min(32u, n - 32u * (c + b)));
        barrier();
        for (uint g = lid; g < HK_NORM_SB / 32u; g += WG) {
            uint g0 = c + 32u * g;
            if (g0 < nb) {
                precise float s = 0.0;
                for (uint j = 0; j < min(32u, nb - g0); j++)
                    s = s + hk_norm_p[32u * g + j];
                hk_norm_g[g0 / 32u] = s;
            }
        }
        barrier();
    }
    precise float t = 0.0;
    for (uint g = 0; g < (nb + 31u) / 32u; g++)
        t = t + hk_norm_g[g];
    return t;
}
#endif
