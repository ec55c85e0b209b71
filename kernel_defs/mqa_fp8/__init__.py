"""FP8 paged and ragged MQA logits (the DeepSeek-V3.2 / GLM-5 indexer): docs/families/mqa_fp8.md."""
