"""mqa_runs_schedule family: one-launch builders of the "runs" schedules (decode varctx table, one-row-per-CTA prefill table)."""
