"""The public benchmarks of our papers, one folder each: its loader (the published data and schema), its
protocol data (prompts, tool descriptions and few-shot examples, word for word, with their source), its
official scoring (the benchmark's own code reproduced, quirks included) beside our strict scoring, and its
paper-layout tables. Shared machinery (the loop, backends, judge, run directory, report) stays in `eval/`.
README.md here is the matrix: each model through each benchmark as its paper ran it, and the recipe of each cell.
"""
