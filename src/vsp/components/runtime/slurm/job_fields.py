"""The field names of Slurm REST v0.0.42 ``job_desc_msg``: what a submitted ``job`` may carry.

Taken from the ``v0.0.42_job_desc_msg`` schema of Slurm 24.11's OpenAPI document (``slurmrestd
--generate-openapi-spec -d v0.0.42 -s openapi/slurmctld,openapi/slurmdbd``); the conformance tests
(``tests/conformance``) compare this set with the document that slurmrestd writes. slurmrestd
ignores a field it does not know, with only a warning (``Ignoring unknown field "..." ... in
DATA_PARSER_JOB_DESC_MSG``), so a misspelt ``extra_fields`` key would silently do nothing:
``job_checks`` refuses it before submission instead.
"""

from __future__ import annotations

JOB_DESC_FIELDS: frozenset[str] = frozenset(
    """
    account account_gather_frequency admin_comment allocation_node_list allocation_node_port
    argv array batch_features begin_time burst_buffer cluster_constraint clusters comment
    constraints container container_id contiguous core_specification cpu_binding
    cpu_binding_flags cpu_frequency cpus_per_task cpus_per_tres crontab
    current_working_directory deadline delay_boot dependency distribution
    distribution_plane_size end_time environment excluded_nodes extra flags group_id
    hetjob_group hold immediate job_id kill_on_node_fail kill_warning_delay kill_warning_flags
    kill_warning_signal licenses mail_type mail_user maximum_cpus maximum_nodes mcs_label
    memory_binding memory_binding_type memory_per_cpu memory_per_node memory_per_tres
    minimum_boards_per_node minimum_cpus minimum_cpus_per_node minimum_nodes
    minimum_sockets_per_board name network nice nodes ntasks_per_tres oom_kill_step open_mode
    overcommit partition power_flags prefer priority profile qos reboot requeue required_nodes
    required_switches reservation reserve_ports rlimits script segment_size selinux_context
    shared site_factor sockets_per_node spank_environment standard_error standard_input
    standard_output tasks tasks_per_board tasks_per_core tasks_per_node tasks_per_socket
    temporary_disk_per_node thread_specification threads_per_core time_limit time_minimum
    tres_bind tres_freq tres_per_job tres_per_node tres_per_socket tres_per_task user_id
    wait_all_nodes wait_for_switch wckey x11 x11_magic_cookie x11_target_host x11_target_port
    """.split()
)
