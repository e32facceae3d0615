"""The use cases: every sequence of more than one stage lives here, returns data and reports
progress through callbacks; ``benanza.cli`` and ``benanza.api`` call one of them and format it.

measure (load models, generate a project, the calls a profile logged; build and run projects here or
on a cluster; ``benanza run`` and ``benanza pipeline``), quickstart (the README's main job), prepare
(the analyzer's inputs, with every check before an analysis), analysis (analyze a model; the checks
after it), analysis_cache (prepared inputs kept on disk).
"""
