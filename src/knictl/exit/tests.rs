use super::*;

fn rpc(code: Code) -> ClientError {
    ClientError::Rpc {
        code,
        message: "m".to_owned(),
    }
}

#[test]
fn every_documented_code_is_in_the_help_text() {
    for exit in [
        Exit::Success,
        Exit::Failed,
        Exit::Usage,
        Exit::Unreachable,
        Exit::NotFound,
        Exit::Problems,
    ] {
        assert!(
            HELP.contains(&format!("\n  {}  ", exit.code())),
            "{exit:?} undocumented"
        );
    }
}

#[test]
fn not_found_is_4_and_other_statuses_are_1() {
    assert_eq!(Exit::of_error(&rpc(Code::NOT_FOUND)), Exit::NotFound);
    assert_eq!(Exit::of_error(&rpc(Code::INVALID_ARGUMENT)), Exit::Failed);
    assert_eq!(
        Exit::of_error(&rpc(Code::FAILED_PRECONDITION)),
        Exit::Failed
    );
}

#[test]
fn a_check_difference_is_5_and_its_not_found_stays_4() {
    assert_eq!(
        Exit::of_check_error(&rpc(Code::FAILED_PRECONDITION)),
        Exit::Problems
    );
    assert_eq!(Exit::of_check_error(&rpc(Code::NOT_FOUND)), Exit::NotFound);
    assert_eq!(Exit::of_check_error(&rpc(Code::INTERNAL)), Exit::Failed);
}

#[test]
fn a_failed_connection_is_3() {
    let err = ClientError::Connect {
        path: "/nonexistent".into(),
        source: std::io::Error::from(std::io::ErrorKind::NotFound),
    };
    assert_eq!(Exit::of_error(&err), Exit::Unreachable);
}
