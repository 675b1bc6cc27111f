// The MoE router's ranking (route.comp, and the experts' GLU that ranks its own slot's expert,
// matvec.comp's HK_MOE_RANK): experts by logit, larger first, ties to the lower index; NaN logits
// are never chosen. A round picks the best expert the subgroup has not chosen yet: each lane
// offers its own best unchosen expert, the subgroup takes the best offer. Lane l of a subgroup of
// `lanes` owns experts l, l + lanes, ...; define HK_ROUTE_LOGIT(i) (expert i's logit) before the
// include.
#define HK_NONE 0xFFFFFFFFu

// (va, ia) ranks before (vb, ib): larger logit, then lower index; NaN never ranks
bool hk_before(float va, uint ia, float vb, uint ib) { return va > vb || (va == vb && ia < ib); }

// One round over n experts: its winner (HK_NONE where no expert is left that has a number) and
// the winner's logit in best. taken: the lane's chosen experts, bit j for expert lane + j * lanes
// (n <= 64 lanes); the winner's owner sets its bit.
uint hk_route_round(uint lane, uint lanes, uint n, inout uvec2 taken, out float best)
{
    float bv = -1.0 / 0.0;
    uint bi = HK_NONE;
    for (uint i = lane, j = 0u; i < n; i += lanes, j++) {
        float v = HK_ROUTE_LOGIT(i);
        if ((taken[j >> 5] & (1u << (j & 31u))) == 0u && hk_before(v, i, bv, bi)) {
            bv = v;
            bi = i;
        }
    }
    best = subgroupMax(bi == HK_NONE ? -1.0 / 0.0 : bv);
    uint win = subgroupMin(bi != HK_NONE && bv == best ? bi : HK_NONE);
    if (win != HK_NONE && win % lanes == lane) {
        uint j = win / lanes;
        taken[j >> 5] |= 1u << (j & 31u);
    }
    return win;
}
