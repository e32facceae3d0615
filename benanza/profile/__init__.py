"""Readers for what a framework run leaves behind: library API logs, framework profiles,
kernel traces and the profile bundle directory that holds them.

Each reader is pure parsing into plain frozen dataclasses; analysis lives elsewhere.
"""

from benanza.apis.engine_config import engine_config_name
from benanza.profile.bundle import Bundle, read_bundle, write_meta
from benanza.profile.cublas_log import read_cublas_log
from benanza.profile.cudnn_log import read_cudnn_log
from benanza.profile.kineto import busy_time, gaps, read_kineto_trace
from benanza.profile.ort_profile import read_ort_profile

__all__ = ["Bundle", "busy_time", "engine_config_name", "gaps", "read_bundle", "read_cublas_log", "read_cudnn_log",
           "read_kineto_trace", "read_ort_profile", "write_meta"]
