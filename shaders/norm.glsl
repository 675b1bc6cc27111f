// RMSNorm's sum of squares in one fixed order, so that every kernel that normalises a row gets
// the same bits whatever its workgroup (rmsnorm.comp for hk_rmsnorm and hk_rmsnorm_q8_1, the int8
// matvec on f32 x, matvec.comp HK_XF32): the row in blocks of 32 values, each block's squares
// summed in index order (P_b), the blocks in groups of 32, each group's P_b summed in order (G_g),
// then the G_g in order. Every product and sum is its own f32 operation (precise). Include after
// the declaration of the buffer `x` the row is read from, or define HK_NORM_X(i) (the value at
// index i) to read it from elsewhere (rope.comp: a head staged in shared memory).
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

// P_b of a whole block already held as 32 values in order: hk_block_sumsq's sum without its loads
float hk_block_sumsq_held(vec4 v[8])
{
    precise float p = 0.0;
    for (uint j = 0; j < 8u; j++)
        for (uint c = 0; c < 4u; c++) {
            precise float s = v[j][c] * v[j][c];
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
