"""Written by ``tools/known_code.py --layouts`` (do not edit): for each function of
``_known.FUNCTIONS``, the digest of the exact text of every released block whose
fingerprint ``_known.TABLE`` holds -> (its number of lines, that fingerprint). A block
with one of these texts is identified without tokenizing; any other text is tokenized."""

LAYOUTS: dict[str, dict[str, tuple[int, str]]] = {
    "urllib3.connection._ssl_wrap_socket_and_match_hostname": {
        "6042d8cfb7db297c4535d2c6f3166565": (125, "a011a76a28dbbd2629665889e0ca2d76"),
        "86b027c881b94628bf75e990c890a7a6": (125, "6382e6f4465e27521b79268d6c24be1b"),
        "b14e6618fb382dd202a7423477134ae7": (126, "a011a76a28dbbd2629665889e0ca2d76"),
    },
    "urllib3.util.ssl_.ssl_wrap_socket": {
        "746d4a8c5efbd93b8ca68aaf3ccc0bf4": (75, "567de20dfe988f5fcac070db88c2a525"),
        "88d88ec908bddd6ca7e9817379c68e8b": (77, "89ac59860d244d40c6556a837ec38574"),
        "b1533aa3455786191d4c30cc5f06dfbb": (74, "470237a75e51b437d887d7f6bb02b96f"),
    },
    "urllib3.util.ssl_.create_urllib3_context": {
        "1baefe618d420e0a979b4378bd61a132": (147, "7f22de8d1d84b6c8ef70116cb3d12421"),
        "31381fe34a8c39eae6c4e8db184eca66": (152, "2eaaf407fff803875c0fe2aac1fee88e"),
        "3bb110420cc4798195d1b93229d77b88": (149, "b065537b595d642c9cf14a3ddf3fd80c"),
        "487b4bf13076986aa4c97476277545ac": (138, "c4b68b77e8c7ffa49654de386dcd25a5"),
        "4b624dcaede41845cc1f983c635150fb": (143, "dca23e72c757bd94dfef3dc537798671"),
        "4bda590c098aee762b4eac2ee0ab715a": (142, "1cacd3c9345fb6addf54fea70412f68c"),
        "95938bcf816c0841b3aa9942b586fc21": (142, "1cacd3c9345fb6addf54fea70412f68c"),
        "99ebda85e13eb6d44fad620f2676ca19": (135, "5f95d31dd7101b20759008b42bd2e15f"),
        "ea56b7b955ac9674d66dd7f2148e9cd1": (149, "29af9a8e48f4c95492d4f57773936c26"),
    },
    "urllib3.util.ssl_.resolve_cert_reqs": {
        "0d35e26485f80bd8fa303cf364bfa564": (23, "f4f285a170768eaa74dd5f7e6cc5f8b3"),
    },
    "urllib3.util.ssl_.resolve_ssl_version": {
        "825a82d7a4596700d868f2066975ee6a": (16, "ffe08514b0f237db2421c84537c0dd4a"),
    },
    "urllib3.util.ssl_._is_key_file_encrypted": {
        "0ae335640c371bd8e82fd2dc218b5a41": (11, "0e14f5ef6b06c62d2f92cceba73ffaa1"),
    },
}
