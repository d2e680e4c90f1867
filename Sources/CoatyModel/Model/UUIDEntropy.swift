#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Random bits for ``CoatyUUID/init()``, cheaply.
///
/// `SystemRandomNumberGenerator` costs a system call per 8 bytes on Linux, and a struct whose
/// `objectId` defaults to `CoatyUUID()` evaluates that default on every decode. On Linux each
/// thread therefore keeps 256 bytes of kernel randomness (`getentropy`), refilled when used up, in
/// memory marked wipe-on-fork so a forked child never repeats its parent's bytes (the design of
/// `arc4random`). The page belongs to one thread only; no state is shared. Elsewhere the
/// platform's `arc4random_buf` is already fast.
enum UUIDEntropy {
    /// 128 random bits.
    static func next() -> (UInt64, UInt64) {
        #if os(Linux)
            if let pool = ThreadPool.current() {
                return pool.take()
            }
            var words: (UInt64, UInt64) = (0, 0)
            fillFromKernel(&words)
            return words
        #else
            var words: (UInt64, UInt64) = (0, 0)
            withUnsafeMutableBytes(of: &words) { arc4random_buf($0.baseAddress!, 16) }
            return words
        #endif
    }

    #if os(Linux)
        /// Fills `words` straight from the kernel (the fallback when no pool can be set up).
        static func fillFromKernel(_ words: inout (UInt64, UInt64)) {
            withUnsafeMutableBytes(of: &words) { buffer in
                if getentropy(buffer.baseAddress!, 16) != 0 {
                    // getentropy cannot fail on Linux ≥ 3.17 once the kernel pool is ready; be safe anyway.
                    var generator = SystemRandomNumberGenerator()
                    buffer.storeBytes(of: generator.next() as UInt64, toByteOffset: 0, as: UInt64.self)
                    buffer.storeBytes(of: generator.next() as UInt64, toByteOffset: 8, as: UInt64.self)
                }
            }
        }

        /// One thread's page: a remaining-byte count (zeroed by a fork, which forces a refill) and the bytes.
        struct ThreadPool {
            static let pageSize = 4096
            static let dataOffset = 16
            let page: UnsafeMutableRawPointer

            /// The pthread key owning each thread's page; the destructor unmaps it at thread exit.
            static let key: pthread_key_t? = {
                var key = pthread_key_t()
                let status = pthread_key_create(&key) { pointer in
                    if let pointer { munmap(pointer, ThreadPool.pageSize) }
                }
                return status == 0 ? key : nil
            }()

            static func current() -> ThreadPool? {
                guard let key else { return nil }
                if let existing = pthread_getspecific(key) {
                    return ThreadPool(page: existing)
                }
                let mapped = mmap(nil, pageSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                guard let mapped, mapped != MAP_FAILED else { return nil }
                // MADV_WIPEONFORK (18): without it a child could repeat the parent's bytes, so no pool.
                guard madvise(mapped, pageSize, 18) == 0, pthread_setspecific(key, mapped) == 0 else {
                    munmap(mapped, pageSize)
                    return nil
                }
                return ThreadPool(page: mapped)
            }

            func take() -> (UInt64, UInt64) {
                var remaining = page.load(as: Int.self)
                if remaining < 16 || remaining > ThreadPool.pageSize - ThreadPool.dataOffset {
                    remaining = refill()
                    if remaining < 16 {
                        var words: (UInt64, UInt64) = (0, 0)
                        UUIDEntropy.fillFromKernel(&words)
                        return words
                    }
                }
                let offset = ThreadPool.dataOffset + remaining - 16
                let words = (
                    page.loadUnaligned(fromByteOffset: offset, as: UInt64.self),
                    page.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self)
                )
                // Used bytes are erased so they cannot leak later.
                (page + offset).initializeMemory(as: UInt8.self, repeating: 0, count: 16)
                page.storeBytes(of: remaining - 16, as: Int.self)
                return words
            }

            /// Refills the data area with one system call (16 UUIDs' worth); returns the bytes available.
            private func refill() -> Int {
                // getentropy returns at most 256 bytes per call.
                let usable = getentropy(page + ThreadPool.dataOffset, 256) == 0 ? 256 : 0
                page.storeBytes(of: usable, as: Int.self)
                return usable
            }
        }
    #endif
}
