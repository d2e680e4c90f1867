// coaty-fuzz: libFuzzer's entry point over `FuzzTarget` (built by `Fuzz/run` with
// `-sanitize=fuzzer,address -DCOATY_LIBFUZZER`, `COATY_FUZZ_TARGET` naming the target), or,
// built normally, a replayer: `coaty-fuzz TARGET FILE-OR-DIRECTORY…` runs each input through the
// target once and exits 1 on the first violated property.
import CoatyFuzzTargets
import Foundation

#if COATY_LIBFUZZER
    /// libFuzzer's entry point: one input through the selected target.
    @_cdecl("LLVMFuzzerTestOneInput")
    public func coatyFuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
        FuzzTarget.selected.run(size == 0 ? [] : Array(UnsafeBufferPointer(start: data, count: size)))
        return 0
    }

    /// libFuzzer's driver (`-sanitize=fuzzer` links it).
    @_silgen_name("LLVMFuzzerRunDriver")
    func runFuzzerDriver(
        _ argc: UnsafeMutablePointer<CInt>,
        _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
        _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
    ) -> CInt

    /// The executable's entry point: SwiftPM links an executable target's `main` to
    /// `<product>_main`, so libFuzzer's own `main` is not used; this one runs libFuzzer's driver.
    @_cdecl("coaty_fuzz_main")
    public func coatyFuzzMain(
        _ argc: CInt,
        _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
    ) -> CInt {
        var count = argc
        var arguments = argv
        return runFuzzerDriver(&count, &arguments) { data, size in coatyFuzzOne(data, size) }
    }
#else
    /// The replayer.
    @main
    enum Replayer {
        static func main() throws {
            let arguments = CommandLine.arguments.dropFirst()
            guard let name = arguments.first, let target = FuzzTarget(rawValue: name) else {
                let names = FuzzTarget.allCases.map(\.rawValue).joined(separator: "|")
                FileHandle.standardError.write(Data("usage: coaty-fuzz \(names) PATH…\n".utf8))
                exit(2)
            }
            var count = 0
            for path in arguments.dropFirst() {
                var isDirectory: ObjCBool = false
                guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
                    FileHandle.standardError.write(Data("coaty-fuzz: no such file: \(path)\n".utf8))
                    exit(1)
                }
                let files =
                    isDirectory.boolValue
                    ? try FileManager.default.contentsOfDirectory(atPath: path).sorted().map { path + "/" + $0 }
                    : [path]
                for file in files {
                    if let violation = target.check([UInt8](FileManager.default.contents(atPath: file) ?? Data())) {
                        FileHandle.standardError.write(Data("coaty-fuzz: \(file): \(violation)\n".utf8))
                        exit(1)
                    }
                    count += 1
                }
            }
            print("\(target.rawValue): \(count) inputs, every property held")
        }
    }
#endif
