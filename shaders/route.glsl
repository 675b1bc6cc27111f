// The MoE router's ranking (route.comp, and the experts' GLU that ranks its own slot's expert,
// matvec.comp's HK_MOE_RANK): experts by logit, larger first, ties to the lower index; NaN logits
// are never chosen. A round picks the best expert the subgroup has not chosen yet: each lane
// offers its own best unchosen candidate (bv, bi), bi HK_NONE for none.
#define HK_NONE 0xFFFFFFFFu

// (va, ia) ranks before (vb, ib): larger logit, then lower index; NaN never ranks
bool hk_before(float va, uint ia, float vb, uint ib) { return va > vb || (va == vb && ia < ib); }

// The round's winner over the subgroup's offers (HK_NONE if no lane offers one); best gets its logit.
uint hk_route_round(float bv, uint bi, out float best)
{
    best = subgroupMax(bi == HK_NONE ? -1.0 / 0.0 : bv);
    return subgroupMin(bi != HK_NONE && bv == best ? bi : HK_NONE);
}
