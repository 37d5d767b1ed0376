"""distrl_core"""
