"""distrl_core/algos"""
