"""Meta-World (Yu et al. 2019; Meta-World+ 3.x) as an mtrl plugin: ``metaworld/<task>-v3``."""
