# Example `rego_policy` (SPEC §3.7): refuses obviously destructive tools and arguments.
# Input: {tool_name, arguments, server_name}. The proxy allows only when `allow` is exactly
# true, and shows `deny_reason` to the model when present.
package deny_dangerous

import rego.v1

default allow := false

allow if {
	is_string(input.tool_name)
	not dangerous_tool
	count(dangerous_arguments) == 0
}

# Tool names whose words say they destroy things: delete_file, drop_table, rm, wipe-disk, ...
dangerous_tool if {
	is_string(input.tool_name)
	regex.match(`(?i)(^|[_.\-]|__)(delete|drop|destroy|truncate|wipe|purge|erase|rm|rmdir|format|shutdown|kill)([_.\-]|$)`, input.tool_name)
}

# String arguments (at any depth) that look like shell or SQL demolition.
dangerous_arguments contains path if {
	walk(input.arguments, [path, value])
	is_string(value)
	regex.match(`(?i)(\brm\s+-[a-z]*(rf|fr)|\bdrop\s+(table|database|schema)\b|\btruncate\s+table\b|\bmkfs\b|\bdd\s+if=|:\(\)\s*\{)`, value)
}

deny_reason := concat("", ["tool ", input.tool_name, " looks destructive; this proxy refuses it"]) if dangerous_tool

else := "an argument looks like a destructive shell or SQL command; this proxy refuses it" if count(dangerous_arguments) > 0
