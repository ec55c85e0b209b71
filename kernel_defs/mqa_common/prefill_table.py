"""The prefill kernel's work table, the contract between the prefill kernel and the metadata kernels
that build it (a shared module, so a change here rebuilds both families).

cta_info int32 [slots, CTA_INFO_INTS]: (first_row, n_rows, batch, chunk_start, chunk_count, last_page,
writes_fill, 0), one slot per CTA; a CTA scores up to WAVES rows of one batch over chunks of
CHUNK_TOKENS tokens. writes_fill = 1 (the metadata kernels' tables) makes the CTA also store the -inf
of its share of the cells outside its group's chunks, so the output needs no fill; 0 (a converted
table) leaves the cells outside its windows to the caller's fill.
Serving engines build a one-row-per-CTA table instead, int32 [slots, ROW_INFO_INTS]:
(row, batch, chunk_start, chunk_count, local_start, local_end) with chunks of block_k tokens.
"""
CHUNK_TOKENS = 256        # tokens staged in LDS per step (4 pages at P=64, 2 at P=128)
WAVES = 4                 # one query row per wave, four rows per CTA
CTA_INFO_INTS = 8
ROW_INFO_INTS = 6
