import CoatyCore
import Testing

@testable import CoatyStore

@Suite("Recorder group view: who takes over a gone member's session")
struct RecorderGroupViewTests {
    /// Three ids in identity-id order.
    let ids = (0..<3).map { _ in CoatyUUID() }.sorted { $0.uuidString < $1.uuidString }

    @Test("The first member alive attempts at once, the next after 3 s, each gone member once")
    func ranks() {
        var first = GroupView(members: Set(ids))
        var second = GroupView(members: Set(ids))
        first.gone = [ids[2]]
        second.gone = [ids[2]]
        #expect(first.startAttempts(by: ids[0]).map(\.delay) == [.zero])
        #expect(second.startAttempts(by: ids[1]).map(\.delay) == [.seconds(3)])
        #expect(first.startAttempts(by: ids[0]).isEmpty, "an attempt is started once")
    }

    @Test("A gone member that sorts first does not hold up the others")
    func goneFirstMember() {
        var view = GroupView(members: Set(ids))
        view.gone = [ids[0]]
        let attempts = view.startAttempts(by: ids[1])
        #expect(attempts.map(\.member) == [ids[0]])
        #expect(attempts.map(\.delay) == [.zero])
    }

    @Test("A session is taken over until it is cleared, waited for while a live member announced taking it")
    func nextStep() {
        var view = GroupView(members: Set(ids))
        view.gone = [ids[2]]
        #expect(view.nextStep(for: ids[2], by: ids[1]) == .takeOver)
        view.takers[ids[2]] = ids[0]
        #expect(view.nextStep(for: ids[2], by: ids[1]) == .wait, "a live member takes it over")
        view.gone.insert(ids[0])
        #expect(view.nextStep(for: ids[2], by: ids[1]) == .takeOver, "the taker is gone too")
        view.members.remove(ids[2])
        #expect(view.nextStep(for: ids[2], by: ids[1]) == .done, "its announcement was cleared: done")
    }

    @Test("A member that came back (announced again, no longer gone) is not waited for")
    func memberCameBack() {
        var view = GroupView(members: Set(ids))
        view.takers[ids[2]] = ids[0]
        #expect(view.nextStep(for: ids[2], by: ids[1]) == .done)
    }
}
