"""Benchmarks like the published ones: llama-benchy runs, their history, scaling reports.

Modules, in the order a run passes through them:

* profile.py: what to measure (the published preset, or custom values);
* preflight.py, endpoint.py: refuse bad input before measuring anything;
* benchy.py, prompt_source.py, progress.py, runner.py: run the pinned llama-benchy;
* recording.py, record.py, history.py: store the run in the client's SQLite history;
* results.py, report.py, exports.py, chart.py: read, compare and export the figures;
* scale.py: the same profile on 1, 2, 4 and 8 nodes, given a way to bring the model up.
"""
