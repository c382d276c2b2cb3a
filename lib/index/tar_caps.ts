// The file-capability xattr (`security.capability`) of a PAX header, as libcap names its bits.

/** Linux capability numbers (include/uapi/linux/capability.h), named as libcap prints them. */
const CAP_NAMES = [
  "chown",
  "dac_override",
  "dac_read_search",
  "fowner",
  "fsetid",
  "kill",
  "setgid",
  "setuid",
  "setpcap",
  "linux_immutable",
  "net_bind_service",
  "net_broadcast",
  "net_admin",
  "net_raw",
  "ipc_lock",
  "ipc_owner",
  "sys_module",
  "sys_rawio",
  "sys_chroot",
  "sys_ptrace",
  "sys_pacct",
  "sys_admin",
  "sys_boot",
  "sys_nice",
  "sys_resource",
  "sys_time",
  "sys_tty_config",
  "mknod",
  "lease",
  "audit_write",
  "audit_control",
  "setfcap",
  "mac_override",
  "mac_admin",
  "syslog",
  "wake_alarm",
  "block_suspend",
  "audit_read",
  "perfmon",
  "bpf",
  "checkpoint_restore",
];

/**
 * The permitted set of a `vfs_cap_data` value (revision 1: 32 bits; 2 and 3: 64 bits, 3 adds
 * a root uid), as `cap_<name>`, or `cap_<n>` for a number newer than this table.
 */
export function decodeCapabilities(v: Uint8Array): string[] {
  if (v.length < 12) return [];
  const dv = new DataView(v.buffer, v.byteOffset, v.byteLength);
  const rev = dv.getUint32(0, true) & 0xff000000;
  const words = rev === 0x01000000 ? 1 : (rev === 0x02000000 || rev === 0x03000000) ? 2 : 0;
  if (words === 0 || v.length < 4 + 8 * words) return [];
  const out: string[] = [];
  for (let w = 0; w < words; w++) {
    const permitted = dv.getUint32(4 + 8 * w, true);
    for (let b = 0; b < 32; b++) {
      if (permitted & (1 << b)) {
        const n = w * 32 + b;
        out.push(`cap_${CAP_NAMES[n] ?? String(n)}`);
      }
    }
  }
  return out;
}
