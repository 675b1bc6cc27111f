// Push constants of flash attention (flash.comp) and its split combine (flash_combine.comp);
// src/kernels/flash.c fills them in this order.
HK_PUSH_BEGIN
    uint n_q;         // query tokens
    uint n_heads;     // query heads
    uint group;       // query heads per kv head (n_heads / n_kv_heads)
    uint seq_k;       // keys attended; 0: read the counter (binding 5) and clamp it
    uint capacity;    // cache rows per kv head
    uint causal;      // query i sees keys 0 .. seq_k - n_q + i
    float scale;      // scale * log2(e): logits in base 2
    uint k_row;       // byte strides of the cache
    uint k_head;
    uint v_row;
    uint v_head;
    uint row_tiles;   // workgroups along the rows (query, head) of one kv head
    uint n_split;     // key chunks (> 1: partials to the workspace, then flash_combine.comp)
    uint split_tiles; // key tiles per chunk
HK_PUSH_END

// Rows of one kv head are (query token, head of its group) pairs, heads inner: row r is token
// r / group, query head kv_head * group + r % group. Its output row (and q row) in memory:
uint hk_out_row(uint row, uint kv_head) { return (row / pc.group) * pc.n_heads + kv_head * pc.group + row % pc.group; }
