"""The per-source compile cache: keys, sealing, and what a worker may and may not leave behind."""
import os

from sandbox.compile_cache import CompileCache, source_key

SRC_A = "import triton\n# kernel A\n"
SRC_B = "import triton\n# kernel B\n"


def test_keys_follow_the_exact_source_text():
    assert source_key(SRC_A) == source_key(SRC_A)
    assert source_key(SRC_A) != source_key(SRC_B)
    assert source_key(SRC_A) != source_key(SRC_A + " ")
    assert len(source_key(SRC_A)) == 24


def test_each_source_gets_its_own_directory(tmp_path):
    cache = CompileCache(tmp_path)
    a, _ = cache.checkout(SRC_A)
    b, _ = cache.checkout(SRC_B)
    assert a != b and a.parent == b.parent == tmp_path


def test_a_sealed_cache_is_reused_verified_and_read_only(tmp_path):
    cache = CompileCache(tmp_path)
    folder, note = cache.checkout(SRC_A)
    assert "first evaluation" in note
    (folder / "key1").mkdir()
    (folder / "key1" / "k.cubin").write_bytes(b"cubin")
    cache.seal(SRC_A)
    assert cache.sealed(SRC_A)
    assert not os.access(folder / "key1" / "k.cubin", os.W_OK) or os.geteuid() == 0
    again, note = cache.checkout(SRC_A)
    assert again == folder and "1 files verified" in note
    assert (folder / "key1" / "k.cubin").read_bytes() == b"cubin"


def test_files_added_after_the_seal_are_removed(tmp_path):
    cache = CompileCache(tmp_path)
    folder, _ = cache.checkout(SRC_A)
    (folder / "ok.bin").write_bytes(b"1")
    cache.seal(SRC_A)
    (folder / "planted").mkdir()
    (folder / "planted" / "evil.cubin").write_bytes(b"x")
    cache.checkout(SRC_A)
    assert not (folder / "planted" / "evil.cubin").exists() and (folder / "ok.bin").exists()


def test_an_altered_sealed_cache_is_wiped(tmp_path):
    cache = CompileCache(tmp_path)
    folder, _ = cache.checkout(SRC_A)
    (folder / "k.cubin").write_bytes(b"honest")
    cache.seal(SRC_A)
    os.chmod(folder / "k.cubin", 0o600)
    (folder / "k.cubin").write_bytes(b"tampered")
    again, note = cache.checkout(SRC_A)
    assert "altered" in note and not (again / "k.cubin").exists() and not cache.sealed(SRC_A)


def test_an_owned_cache_removes_itself(tmp_path):
    cache = CompileCache()
    folder, _ = cache.checkout(SRC_A)
    (folder / "f").write_bytes(b"1")
    cache.seal(SRC_A)
    cache.close()
    assert not cache.root.exists()


def _sealed_incumbent(cache):
    folder, _ = cache.checkout(SRC_A)
    (folder / "key1").mkdir()
    (folder / "key1" / "k.cubin").write_bytes(b"incumbent's cubin")
    (folder / "key2.json").write_bytes(b"{}")
    cache.seal(SRC_A)
    return folder


def test_a_new_source_starts_from_a_verified_copy_of_the_incumbents_sealed_cache(tmp_path):
    cache = CompileCache(tmp_path)
    inc = _sealed_incumbent(cache)
    folder, note = cache.checkout(SRC_B, seed_from=SRC_A)
    assert "verified copy" in note and "2 of 2 files" in note
    assert (folder / "key1" / "k.cubin").read_bytes() == b"incumbent's cubin" and folder != inc
    # the copy is the candidate's own: what it writes there never reaches the incumbent's directory
    (folder / "key1" / "k.cubin").write_bytes(b"planted")
    (folder / "new.cubin").write_bytes(b"x")
    assert (inc / "key1" / "k.cubin").read_bytes() == b"incumbent's cubin" and not (inc / "new.cubin").exists()
    assert "1 files verified" not in cache.checkout(SRC_A)[1] and "2 files verified" in cache.checkout(SRC_A)[1]


def test_seeding_copies_only_files_that_match_the_manifest_and_only_into_a_fresh_directory(tmp_path):
    cache = CompileCache(tmp_path)
    inc = _sealed_incumbent(cache)
    os.chmod(inc / "key1" / "k.cubin", 0o600)
    (inc / "key1" / "k.cubin").write_bytes(b"tampered")             # altered after the seal
    folder, note = cache.checkout(SRC_B, seed_from=SRC_A)
    assert "1 of 2 files" in note and not (folder / "key1" / "k.cubin").exists()
    # a directory that already holds this source's own compiles is not overwritten
    (folder / "own.cubin").write_bytes(b"own")
    _, note = cache.checkout(SRC_B, seed_from=SRC_A)
    assert "verified copy" not in note and (folder / "own.cubin").read_bytes() == b"own"
    # an unsealed incumbent gives nothing
    _, note = CompileCache(tmp_path / "other").checkout(SRC_B, seed_from=SRC_A)
    assert "not sealed" in note
